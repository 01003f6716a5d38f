//! The tasks extension fixtures (SEP-2663, `io.modelcontextprotocol/tasks`):
//! tools the `tasks-*` scenarios call, and `tasks/get|update|cancel`.
//!
//! rmcp's `TaskManager` runs each task on its own tokio task and keeps its
//! state; one manager lives in [`Shared`] because a 2026-07-28 client polls
//! with separate stateless requests. A tool decides by itself whether to
//! make a task (the client only says it can take one): task-supporting
//! tools do when the request declares the extension and otherwise run
//! inline, task-required ones refuse with `-32021`.

use std::time::Duration;

use rmcp::{
    ErrorData, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
        CreateTaskResult, InputRequest,
    },
    service::RequestContext,
    task_manager::{TaskContext, TaskExit, TaskFuture, TaskOptions},
};
use serde_json::Value;

use super::{
    ask::{Ask, Gathered, accepted_content, from_responses, gather},
    fixtures::one_field_form,
    state::Shared,
    tools::text,
};

pub(crate) const GREET: &str = "greet";
pub(crate) const SLOW_COMPUTE: &str = "slow_compute";
pub(crate) const FAILING_JOB: &str = "failing_job";
pub(crate) const PROTOCOL_ERROR_JOB: &str = "protocol_error_job";
pub(crate) const CONFIRM_DELETE: &str = "confirm_delete";
pub(crate) const MULTI_INPUT: &str = "multi_input";
pub(crate) const WITH_TASK: &str = "test_tool_with_task";

/// How long `failing_job` works before it fails.
const FAILING_JOB_RUNTIME: Duration = Duration::from_secs(1);

/// `slow_compute` never sleeps longer than this, whatever it is asked.
const MAX_COMPUTE: Duration = Duration::from_secs(600);

/// Whether this request's client can take a `CreateTaskResult`.
fn declares_tasks(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.supports_tasks())
}

/// The `-32021` a task-required tool answers a client without the extension.
fn tasks_required() -> ErrorData {
    ErrorData::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

fn created(shared: &Shared, make: impl FnOnce(TaskContext) -> TaskFuture) -> CallToolResponse {
    CreateTaskResult::new(shared.tasks.spawn(TaskOptions::new(), make)).into()
}

fn argument<'a>(request: &'a CallToolRequestParams, name: &str) -> Option<&'a Value> {
    request.arguments.as_ref()?.get(name)
}

/// `greet`: sync-only, so a task hint (even the legacy `task` param) never
/// makes it a task.
pub(crate) fn greet(request: &CallToolRequestParams) -> CallToolResponse {
    let name = argument(request, "name")
        .and_then(Value::as_str)
        .unwrap_or("World");
    text(format!("Hello, {name}!"))
}

/// `slow_compute`: sleeps `seconds`, then answers; a cancel stops it as
/// `cancelled`.
pub(crate) async fn slow_compute(
    shared: &Shared,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> CallToolResponse {
    let seconds = argument(request, "seconds")
        .and_then(Value::as_f64)
        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
        .unwrap_or(0.0);
    let duration = Duration::from_secs_f64(seconds).min(MAX_COMPUTE);
    let label = argument(request, "label")
        .and_then(Value::as_str)
        .unwrap_or("compute")
        .to_owned();
    let result = move || {
        CallToolResult::success(vec![ContentBlock::text(format!(
            "{label}: computed after {seconds}s"
        ))])
    };
    if !declares_tasks(context) {
        tokio::time::sleep(duration).await;
        return result().into();
    }
    created(shared, move |task| {
        Box::pin(async move {
            tokio::select! {
                () = tokio::time::sleep(duration) => Ok(result()),
                () = task.cancelled() => Err(TaskExit::Cancelled),
            }
        })
    })
}

/// `failing_job`: task-required; the tool runs and reports an error, so the
/// task completes with `isError` (a failed task means a protocol error).
pub(crate) fn failing_job(
    shared: &Shared,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    if !declares_tasks(context) {
        return Err(tasks_required());
    }
    Ok(created(shared, |task| {
        Box::pin(async move {
            tokio::select! {
                () = tokio::time::sleep(FAILING_JOB_RUNTIME) => Ok(CallToolResult::error(vec![
                    ContentBlock::text("failing_job failed, as it always does"),
                ])),
                () = task.cancelled() => Err(TaskExit::Cancelled),
            }
        })
    }))
}

/// `protocol_error_job`: task-required; ends in a protocol error, so the
/// task fails with the error inlined.
pub(crate) fn protocol_error_job(
    shared: &Shared,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    if !declares_tasks(context) {
        return Err(tasks_required());
    }
    Ok(created(shared, |_task| {
        Box::pin(async {
            Err(TaskExit::Error(ErrorData::internal_error(
                "protocol_error_job broke down, as it always does",
                None,
            )))
        })
    }))
}

fn confirmation(filename: &str) -> Ask {
    Ask::elicit(
        format!("Delete {filename}?"),
        one_field_form("confirm", "boolean"),
    )
}

/// Waits for the client's answer to `ask` through `tasks/update`.
async fn ask_in_task(task: &TaskContext, key: &str, ask: &Ask) -> Result<Value, TaskExit> {
    let request: InputRequest = ask.input_request()?;
    task.request_input(key, request).await
}

fn confirmed(answer: &Value) -> bool {
    accepted_content(answer)
        .and_then(|content| content.get("confirm"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// `confirm_delete`: asks for a confirmation, then "deletes". As a task it
/// parks in `input_required`; without the extension it asks inline.
pub(crate) async fn confirm_delete(
    shared: &Shared,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let filename = argument(request, "filename")
        .and_then(Value::as_str)
        .unwrap_or("file.txt")
        .to_owned();
    let verdict = |filename: &str, answer: &Value| {
        CallToolResult::success(vec![ContentBlock::text(if confirmed(answer) {
            format!("Deleted {filename}")
        } else {
            format!("Kept {filename}")
        })])
    };
    if !declares_tasks(context) {
        let asks = [("confirm", confirmation(&filename))];
        return Ok(
            match gather(context, request.input_responses.as_ref(), &asks, None).await? {
                Gathered::Pending(pending) => pending.into(),
                Gathered::Ready(answers) => {
                    verdict(&filename, answers.get("confirm").unwrap_or(&Value::Null)).into()
                }
            },
        );
    }
    Ok(created(shared, move |task| {
        Box::pin(async move {
            let answer = ask_in_task(&task, "confirm", &confirmation(&filename)).await?;
            Ok(verdict(&filename, &answer))
        })
    }))
}

/// `multi_input`: task-required; two questions pending at once, so a
/// client can answer them one `tasks/update` at a time.
pub(crate) fn multi_input(
    shared: &Shared,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    if !declares_tasks(context) {
        return Err(tasks_required());
    }
    Ok(created(shared, |task| {
        Box::pin(async move {
            let name = Ask::elicit("What is your name?", one_field_form("name", "string"));
            let confirm = Ask::elicit("Proceed?", one_field_form("confirm", "boolean"));
            let (name, confirm) = futures::join!(
                ask_in_task(&task, "name", &name),
                ask_in_task(&task, "confirm", &confirm)
            );
            let (name, confirm) = (name?, confirm?);
            let name = accepted_content(&name)
                .and_then(|content| content.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("(declined)")
                .to_owned();
            Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                "name={name}, confirmed={}",
                confirmed(&confirm)
            ))]))
        })
    }))
}

/// `test_tool_with_task`: task-required; gathers `user_name` with an
/// `InputRequiredResult` first, then does the work as a task whose result
/// carries the name.
pub(crate) fn with_task(
    shared: &Shared,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    if !declares_tasks(context) {
        return Err(tasks_required());
    }
    let asks = [(
        "user_name",
        Ask::elicit("What is your name?", one_field_form("name", "string")),
    )];
    let answers = match from_responses(request.input_responses.as_ref(), &asks, None)? {
        Gathered::Pending(pending) => return Ok(pending.into()),
        Gathered::Ready(answers) => answers,
    };
    let name = answers
        .get("user_name")
        .and_then(accepted_content)
        .and_then(|content| content.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("(declined)")
        .to_owned();
    Ok(created(shared, move |_task| {
        Box::pin(async move {
            Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                "Hello, {name}! (from a task)"
            ))]))
        })
    }))
}
