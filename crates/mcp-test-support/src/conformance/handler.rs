//! The rmcp `ServerHandler`: capabilities, and routing of every request to
//! the module that implements it.
//!
//! Written by hand rather than with rmcp's tool router: the router would
//! generate tool schemas from Rust types, and several scenarios need the
//! schema exactly as written (see `catalog.rs`); tools here also answer
//! with an `InputRequiredResult` on the same call path as a normal result.

#![allow(deprecated)] // logging/setLevel, resources/subscribe: legacy methods the suite still tests.

use std::sync::{Arc, atomic::Ordering};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
        CompleteResult, GetPromptRequestParams, GetPromptResponse, GetSkillRequestParams,
        GetSkillResult, GetTaskParams, GetTaskResult, Implementation, ListPromptsResult,
        ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult,
        PaginatedRequestParams, ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult,
        ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
        SetLevelRequestMethod, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter,
        Tool, UnsubscribeRequestParams, UpdateTaskParams,
    },
    service::{NotificationContext, RequestContext, SubscriptionContext},
};

use super::{
    ask::is_stateless,
    catalog, fixtures, mrtr, prompts, resources, skills,
    state::{Session, Shared, lock},
    stateless, tasks,
    tools::{self, ElicitationForm},
};

/// The conformance server's handler. Clone it for every connection with
/// [`for_new_session`](Self::for_new_session): clones share the
/// process-wide state (listen streams, tasks, the `requestState` key, the
/// dynamic entries) and get their own session state.
#[derive(Debug, Clone)]
pub struct ConformanceServer {
    pub(crate) shared: Arc<Shared>,
    pub(crate) session: Arc<Session>,
}

impl Default for ConformanceServer {
    fn default() -> Self {
        Self::new()
    }
}

impl ConformanceServer {
    /// A handler with fresh process-wide state.
    pub fn new() -> Self {
        Self {
            shared: Arc::new(Shared::new()),
            session: Arc::default(),
        }
    }

    /// A server that answers like a 2025-era one: no `server/discover`, so a
    /// client falls back to `initialize` (`--legacy-only`).
    pub fn legacy_only() -> Self {
        let server = Self::new();
        server.shared.legacy_only.store(true, Ordering::SeqCst);
        server
    }

    /// A handler for another session (or another stateless request) of
    /// the same server.
    pub fn for_new_session(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            session: Arc::default(),
        }
    }

    async fn dispatch_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let shared = &self.shared;
        Ok(match request.name.as_ref() {
            catalog::SIMPLE_TEXT => tools::simple_text(),
            catalog::IMAGE => tools::image(),
            catalog::AUDIO => tools::audio(),
            catalog::EMBEDDED_RESOURCE => tools::embedded_resource(),
            catalog::MIXED => tools::mixed(),
            catalog::WITH_LOGGING => tools::with_logging(self, &context).await,
            catalog::WITH_PROGRESS => tools::with_progress(&context).await,
            catalog::ERROR => tools::error(),
            catalog::RECONNECTION => tools::reconnection(self, &context).await,
            catalog::SAMPLING => tools::sampling(&request, &context).await?,
            catalog::ELICITATION => {
                tools::elicitation(&request, &context, ElicitationForm::Message).await?
            }
            catalog::SEP1034_DEFAULTS => {
                tools::elicitation(&request, &context, ElicitationForm::Sep1034Defaults).await?
            }
            catalog::SEP1330_ENUMS => {
                tools::elicitation(&request, &context, ElicitationForm::Sep1330Enums).await?
            }
            catalog::JSON_SCHEMA_2020_12 => tools::json_schema_2020_12(&request),
            catalog::HEADER_PARAM => tools::header_param(&request),
            catalog::MISSING_CAPABILITY => {
                stateless::missing_capability(&request, &context).await?
            }
            catalog::STREAMING_ELICITATION => {
                stateless::streaming_elicitation(&request, &context).await?
            }
            catalog::LOGGING_TOOL => stateless::logging_tool(self, &context).await,
            catalog::TRIGGER_TOOL_CHANGE => {
                stateless::trigger_change(self, stateless::ListKind::Tools).await
            }
            catalog::TRIGGER_PROMPT_CHANGE => {
                stateless::trigger_change(self, stateless::ListKind::Prompts).await
            }
            catalog::IRR_ELICITATION => mrtr::elicitation(&request, &context).await?,
            catalog::IRR_SAMPLING => mrtr::sampling(&request, &context).await?,
            catalog::IRR_LIST_ROOTS => mrtr::list_roots(&request, &context).await?,
            catalog::IRR_REQUEST_STATE | catalog::IRR_TAMPERED_STATE => {
                mrtr::confirmed(shared, &request, &context).await?
            }
            catalog::IRR_MULTIPLE_INPUTS => {
                mrtr::multiple_inputs(shared, &request, &context).await?
            }
            catalog::IRR_MULTI_ROUND => mrtr::multi_round(shared, &request, &context).await?,
            catalog::IRR_CAPABILITIES => mrtr::capabilities(&request, &context).await?,
            tasks::GREET => tasks::greet(&request),
            tasks::SLOW_COMPUTE => tasks::slow_compute(shared, &request, &context).await,
            tasks::FAILING_JOB => tasks::failing_job(shared, &context)?,
            tasks::PROTOCOL_ERROR_JOB => tasks::protocol_error_job(shared, &context)?,
            tasks::CONFIRM_DELETE => tasks::confirm_delete(shared, &request, &context).await?,
            tasks::MULTI_INPUT => tasks::multi_input(shared, &context)?,
            tasks::WITH_TASK => tasks::with_task(shared, &request, &context)?,
            catalog::DYNAMIC if shared.dynamic_tool.load(Ordering::SeqCst) => {
                tools::text("The dynamic tool ran")
            }
            unknown => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool `{unknown}`"),
                    None,
                ));
            }
        })
    }
}

impl ServerHandler for ConformanceServer {
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::DiscoverResult, ErrorData> {
        if self.shared.legacy_only.load(Ordering::SeqCst) {
            // What a 2025-era server says to a request before `initialize`.
            return Err(ErrorData::invalid_request(
                "Bad Request: Server not initialized",
                None,
            ));
        }
        Ok(rmcp::model::DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_tasks()
            .enable_skills_with_directory_read()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(
                Implementation::new(fixtures::SERVER_NAME, env!("CARGO_PKG_VERSION"))
                    .with_title("MCP conformance fixture server"),
            )
            .with_instructions(
                "Fixture server for the MCP conformance suite: every tool, resource and prompt \
                 is named after the scenario that uses it.",
            )
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Remembered so the test_trigger_* tools can tell it about changes.
        self.shared.add_legacy_peer(context.peer);
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // 2026-07-28 removed the method: a request's level rides in its _meta.
        if is_stateless(&context) {
            return Err(ErrorData::method_not_found::<SetLevelRequestMethod>());
        }
        *lock(&self.session.log_level) = Some(request.level);
        Ok(())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        Ok(prompts::complete(&request))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(catalog::tools(
            &self.shared,
        )))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        catalog::find(&self.shared, name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.dispatch_tool(request, context).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(resources::list())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        resources::read(&request.uri).map(Into::into)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        resources::subscribe(&self.session, &request.uri)
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        resources::unsubscribe(&self.session, &request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Everything asked for; rmcp narrows it to the declared capabilities.
        Some(requested.clone())
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        stateless::listen(&self.shared, subscription).await;
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(prompts::list(&self.shared))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name == mrtr::PROMPT {
            return mrtr::prompt(&request, &context).await;
        }
        prompts::get(&self.shared, &request.name, request.arguments.as_ref()).map(Into::into)
    }

    // tasks/*: rmcp answers -32021 before these run when the request did
    // not declare the extension, and -32601 if we did not declare it.

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.shared
            .tasks
            .get_task(&request.task_id)
            .map(GetTaskResult::new)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared
            .tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared.tasks.cancel_task(&request.task_id)
    }

    // skills/*: rmcp answers -32601 unless the extension is declared, and
    // checks what these return against SEP-2640.

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        Ok(skills::list())
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        skills::get(&request.uri)
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        skills::read_directory(&request.uri)
    }
}
