//! The gateway's rmcp `ServerHandler`: one MCP server in front of every
//! supervised upstream, a transparent proxy for tools, prompts, resources,
//! completion and logging. Each request is routed by the merged view
//! ([`Directory`]) to its connection and goes through the supervisor like a
//! call; the upstream's answer passes through unchanged apart from what the
//! downstream protocol needs (exposed names, `resultType`), and the upstream's
//! JSON-RPC errors pass through as they are. Supervisor outcomes become text
//! results with `isError: true` for tools (docs/SUPERVISION.md, "What agents
//! read")
//! and JSON-RPC errors carrying the same texts for everything else.

// Logging and resource subscriptions are deprecated by SEP-2577 (protocol
// 2026-07-28); 2025-era clients and servers use them, and the gateway relays them.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestMethod, CallToolRequestParams, CallToolResponse, CancelTaskMethod,
        CancelTaskParams, CancelTaskRequest, ClientRequest, CompleteRequest, CompleteRequestMethod,
        CompleteRequestParams, CompleteResult, ConstString, CustomRequest, CustomResult,
        DiscoverRequestMethod, DiscoverResult, ErrorCode, GetPromptRequest, GetPromptRequestMethod,
        GetPromptRequestParams, GetPromptResponse, GetTaskMethod, GetTaskParams, GetTaskRequest,
        GetTaskResult, Implementation, InitializeRequestParams, InitializeResult,
        InitializeResultMethod, ListPromptsRequestMethod, ListPromptsResult,
        ListResourceTemplatesRequestMethod, ListResourceTemplatesResult,
        ListResourcesRequestMethod, ListResourcesResult, ListToolsRequestMethod, ListToolsResult,
        PaginatedRequestParams, PingRequestMethod, ProtocolVersion, ReadResourceRequest,
        ReadResourceRequestMethod, ReadResourceRequestParams, ReadResourceResponse, Reference,
        ResourceContents, ServerConfig, ServerResult, SetLevelRequest, SetLevelRequestMethod,
        SetLevelRequestParams, SubscribeRequestMethod, SubscribeRequestParams, SubscriptionFilter,
        SubscriptionsListenRequestMethod, Tool, ToolsCapability, UnsubscribeRequestMethod,
        UnsubscribeRequestParams, UpdateTaskMethod, UpdateTaskParams, UpdateTaskRequest,
    },
    service::{NotificationContext, RequestContext, SubscriptionContext},
};

mod replies;

use replies::{
    answer, complete, downstream, is_resource_not_found, unexpected, unknown_prompt,
    unknown_resource,
};
pub(super) use replies::{tool_result, unknown_tool};

use super::{
    directory::{Directory, Target},
    downstream::{DownstreamRequest, DownstreamSession},
    mrtr::{self, Answering, Exchange},
    paging,
    rights::caller_of,
    sessions::OPENING,
    state::GatewayState,
    tool_call, traced,
};
use crate::{
    Forwarded,
    access::{Item, Kind},
    codec::mcp_headers,
    generation::Generation,
    meta,
    telemetry::spans::Target as SpanTarget,
};

/// One downstream session's handler (rmcp makes one per session).
#[derive(Debug, Clone)]
pub struct GatewayHandler {
    state: Arc<GatewayState>,
    session: Arc<DownstreamSession>,
}

impl GatewayHandler {
    pub fn new(state: Arc<GatewayState>) -> Self {
        GatewayHandler {
            state,
            session: Arc::default(),
        }
    }

    /// What this gateway is, given the upstreams in `directory`.
    fn info(&self, directory: &Directory) -> ServerConfig {
        let mut capabilities = directory.capabilities.clone();
        let mut tools = ToolsCapability::default();
        tools.list_changed = Some(true);
        capabilities.tools = Some(tools);
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                "mcp-supervisor",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }

    /// Sends `request` to `target`'s connection on behalf of the downstream
    /// request of `context`.
    async fn forward(
        &self,
        target: &Target,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
    ) -> Forwarded {
        let link = DownstreamRequest::link(context, &target.connection, &self.session);
        self.state
            .forward(&target.connection, request, Some(link))
            .await
    }
}

const INSTRUCTIONS: &str = "Tools, prompts and resources of several MCP servers, supervised. \
     Upstream names may carry a {connection}__ prefix; the meta-tools (list_mcps, \
     search_mcp_tools, get_mcp_tool_schema, describe_mcp, call_mcp) discover and call tools \
     on demand.";

/// The client-to-server methods the gateway serves (rmcp's own names for
/// them). Skills are not among them (not relayed).
const SERVED_METHODS: [&str; 18] = [
    InitializeResultMethod::VALUE,
    DiscoverRequestMethod::VALUE,
    PingRequestMethod::VALUE,
    ListToolsRequestMethod::VALUE,
    CallToolRequestMethod::VALUE,
    ListPromptsRequestMethod::VALUE,
    GetPromptRequestMethod::VALUE,
    ListResourcesRequestMethod::VALUE,
    ListResourceTemplatesRequestMethod::VALUE,
    ReadResourceRequestMethod::VALUE,
    SubscribeRequestMethod::VALUE,
    UnsubscribeRequestMethod::VALUE,
    SubscriptionsListenRequestMethod::VALUE,
    SetLevelRequestMethod::VALUE,
    CompleteRequestMethod::VALUE,
    GetTaskMethod::VALUE,
    UpdateTaskMethod::VALUE,
    CancelTaskMethod::VALUE,
];

/// Served methods that protocol 2026-07-28 removed.
const REMOVED_IN_2026: [&str; 5] = [
    InitializeResultMethod::VALUE,
    PingRequestMethod::VALUE,
    SetLevelRequestMethod::VALUE,
    SubscribeRequestMethod::VALUE,
    UnsubscribeRequestMethod::VALUE,
];

/// Served methods that only protocol 2026-07-28 has.
const ADDED_IN_2026: [&str; 2] = [
    DiscoverRequestMethod::VALUE,
    SubscriptionsListenRequestMethod::VALUE,
];

impl ServerHandler for GatewayHandler {
    fn get_info(&self) -> ServerConfig {
        match self.session.info() {
            Some(info) => info.clone(),
            None => self.info(&self.state.current()),
        }
    }

    /// A tool's definition as listed, so rmcp checks a 2026-07-28 request's
    /// `Mcp-Param-*` headers against the upstream's `x-mcp-header`
    /// annotations (SEP-2243) before the request goes anywhere.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        if self.state.serves_meta_tool(name) {
            return meta::definitions()
                .into_iter()
                .find(|tool| tool.name == name);
        }
        let directory = self.state.current();
        // A tool the caller may not use has no definition to check its
        // headers against, as one that is not there (rmcp asks while it
        // handles the request, within our `Endpoint::handle`).
        if !self.state.rights.is_open() {
            let caller = OPENING
                .try_with(|opening| opening.caller.clone())
                .ok()
                .flatten()?;
            let connection = &directory.tool(name)?.connection;
            if !self.state.rights.may(&caller, Item::tool(connection, name)) {
                return None;
            }
        }
        directory.tool_definition(name).cloned()
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // Capabilities are what the upstreams offer together, so learn them
        // first (bounded: a slow upstream is left out, not waited for).
        let directory = self.state.refresh().await;
        self.session.set_info(self.info(&directory));
        self.session.set_caller(caller_of(&context));
        self.state.rights.seen_now(&self.session, &directory);
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        // As at `initialize`: capabilities are what the upstreams offer.
        let directory = self.state.refresh().await;
        let info = self.session.set_info(self.info(&directory));
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            info.clone(),
        ))
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Everything asked for; rmcp keeps only what the capabilities offer.
        Some(requested.clone())
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        // The stream's resource subscriptions are held upstream like a legacy
        // session's, in a session of the stream's own.
        let session = Arc::new(DownstreamSession::default());
        session.set_caller(caller_of(subscription.request_context()));
        self.state.rights.seen_now(&session, &self.state.current());
        let uris: Vec<String> = subscription
            .accepted()
            .resource_subscriptions
            .iter()
            .flatten()
            .cloned()
            .collect();
        let caller = caller_of(subscription.request_context());
        let method = SubscriptionsListenRequestMethod::VALUE;
        let mut held = Vec::new();
        for uri in uris {
            // A resource the caller may not use is not subscribed to (its
            // updates would tell of it), as one that is not there.
            let Some((target, used)) = self
                .state
                .routed(&caller, method, (Kind::Resource, &uri), |d| {
                    d.resource(&uri)
                })
                .await
            else {
                continue;
            };
            let subscribed = self.state.subscribe(&session, &uri, &target).await;
            let answered = subscribed.answered();
            used.end(if answered { "ok" } else { "error" });
            if answered {
                held.push((uri, target));
            }
        }
        self.state.add_listener(subscription.sink(), &session);
        subscription.cancelled().await;
        self.state.remove_listener(subscription.sink());
        for (uri, target) in held {
            let _ = self.state.unsubscribe(&session, &uri, &target).await;
        }
        Ok(())
    }

    /// rmcp hands us, as a custom request, any request whose params it could
    /// not parse, a known method's included: `tools/call` with `arguments`
    /// that are not an object is invalid params (-32602), not an unknown
    /// method.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let method = request.method;
        // A method we serve arrives here when its params do not fit its
        // type: -32602. Methods the request's protocol generation does not
        // have stay -32601, as rmcp answers them.
        let modern = context
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        let generation_only = if modern {
            REMOVED_IN_2026.as_slice()
        } else {
            ADDED_IN_2026.as_slice()
        };
        let method_str = method.as_str();
        if SERVED_METHODS.contains(&method_str) && !generation_only.contains(&method_str) {
            return Err(ErrorData::invalid_params(
                format!("invalid params for {method}"),
                None,
            ));
        }
        Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, method, None))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.session.set_peer(&context.peer);
        self.state.register(&self.session);
        // rmcp hands over the HTTP request with the message: its session id
        // lets this session's calls take the direct path (`direct.rs`).
        if let Some(id) = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get(&mcp_headers::SESSION_ID))
            .and_then(|id| id.to_str().ok())
        {
            self.state.direct.admit(id, &self.session);
        }
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let span = traced::span(ListToolsRequestMethod::VALUE, SpanTarget::None, &context);
        traced::within(span, self.serve_list_tools(request, context), traced::never).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let span = traced::span(
            CallToolRequestMethod::VALUE,
            SpanTarget::Tool(&request.name.clone()),
            &context,
        );
        traced::within(
            span,
            self.serve_call_tool(request, context),
            traced::call_failed,
        )
        .await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let directory = self.state.listing(cursor(&request)).await;
        let prompts = self.state.rights.visible(
            &caller_of(&context),
            Kind::Prompt,
            directory.prompts(),
            |prompt| &prompt.name,
            |name| {
                directory
                    .prompt(name)
                    .map(|target| target.connection.clone())
            },
        );
        let (page, next) = paging::page("prompts", &prompts, cursor(&request))?;
        let mut result = ListPromptsResult::with_all_items(page);
        result.next_cursor = next;
        Ok(result)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let span = traced::span(
            GetPromptRequestMethod::VALUE,
            SpanTarget::Prompt(&request.name.clone()),
            &context,
        );
        traced::within(span, self.serve_get_prompt(request, context), traced::never).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let directory = self.state.listing(cursor(&request)).await;
        let resources = self.state.rights.visible(
            &caller_of(&context),
            Kind::Resource,
            directory.resources(),
            |resource| &resource.uri,
            |uri| directory.resource(uri).map(|target| target.connection),
        );
        let (page, next) = paging::page("resources", &resources, cursor(&request))?;
        let mut result = ListResourcesResult::with_all_items(page);
        result.next_cursor = next;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let directory = self.state.listing(cursor(&request)).await;
        let templates = self.state.rights.visible(
            &caller_of(&context),
            Kind::Resource,
            directory.templates(),
            |template| &template.uri_template,
            |uri| {
                directory
                    .template(uri)
                    .map(|target| target.connection.clone())
            },
        );
        let (page, next) = paging::page("resources/templates", &templates, cursor(&request))?;
        let mut result = ListResourceTemplatesResult::with_all_items(page);
        result.next_cursor = next;
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let span = traced::span(ReadResourceRequestMethod::VALUE, SpanTarget::None, &context);
        traced::within(
            span,
            self.serve_read_resource(request, context),
            traced::never,
        )
        .await
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let exposed = request.uri;
        let caller = caller_of(&context);
        let (target, used) = self
            .state
            .routed(
                &caller,
                SubscribeRequestMethod::VALUE,
                (Kind::Resource, &exposed),
                |d| d.resource(&exposed),
            )
            .await
            .ok_or_else(|| unknown_resource(&exposed))?;
        let forwarded = self.state.subscribe(&self.session, &exposed, &target).await;
        used.ended(answer(forwarded, |_| Some(())))
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // Ending a subscription is not a use: a session may always drop
        // what it holds (it could subscribe only to what it may use).
        let exposed = request.uri;
        let Some(target) = self.state.route(|d| d.resource(&exposed)).await else {
            return Err(unknown_resource(&exposed));
        };
        let forwarded = self
            .state
            .unsubscribe(&self.session, &exposed, &target)
            .await;
        answer(forwarded, |_| Some(()))
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let span = traced::span(CompleteRequestMethod::VALUE, SpanTarget::None, &context);
        traced::within(span, self.serve_complete(request, context), traced::never).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let id = request.task_id.clone();
        let get = ClientRequest::GetTaskRequest(GetTaskRequest::new(request));
        match self.forward_task(&id, get, &context).await? {
            ServerResult::GetTaskResult(result) => Ok(result),
            _ => Err(unexpected()),
        }
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let id = request.task_id.clone();
        let update = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(request));
        self.forward_task(&id, update, &context).await.map(drop)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let id = request.task_id.clone();
        let cancel = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(request));
        self.forward_task(&id, cancel, &context).await.map(drop)
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // This session gets what it asked for; every upstream that logs is
        // asked for at least that (several clients: the latest request wins
        // upstream, and each session is filtered to its own level here).
        self.session.set_log_level(request.level);
        let sets = self
            .state
            .logging_connections()
            .into_iter()
            .map(|connection| {
                let request = ClientRequest::SetLevelRequest(SetLevelRequest::new(
                    SetLevelRequestParams::new(request.level),
                ));
                let state = self.state.clone();
                async move {
                    if let Forwarded::Refused(outcome) =
                        state.forward(&connection, request, None).await
                    {
                        tracing::debug!(
                            connection,
                            reason = outcome.message(),
                            "logging/setLevel not applied"
                        );
                    }
                }
            });
        futures::future::join_all(sets).await;
        Ok(())
    }
}

impl GatewayHandler {
    async fn serve_list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = Vec::new();
        if self.state.namespaced() {
            let directory = self.state.listing(cursor(&request)).await;
            tools = self.state.rights.visible(
                &caller_of(&context),
                Kind::Tool,
                directory.tools(),
                |tool| &tool.name,
                |name| directory.tool(name).map(|target| target.connection.clone()),
            );
        }
        if self.state.meta() {
            tools.extend(meta::definitions());
        }
        let (page, next) = paging::page("tools", &tools, cursor(&request))?;
        let mut result = ListToolsResult::with_all_items(page);
        result.next_cursor = next;
        Ok(result)
    }

    async fn serve_call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = caller_of(&context);
        if self.state.serves_meta_tool(&request.name) {
            let result =
                tool_call::meta(&self.state, &caller, &request.name, request.arguments).await;
            return Ok(downstream(result));
        }
        let answering = Answering::of(&context, &self.session);
        tool_call::answer(&self.state, request.into(), answering, &caller)
            .await
            .map(CallToolResponse::from)
    }

    async fn serve_get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let name = request.name.clone();
        let caller = caller_of(&context);
        let (target, used) = self
            .state
            .routed(
                &caller,
                GetPromptRequestMethod::VALUE,
                (Kind::Prompt, &name),
                |d| d.prompt(&name).cloned(),
            )
            .await
            .ok_or_else(|| unknown_prompt(&name))?;
        let mut params = request;
        params.name = target.name.clone();
        params.meta = None;
        let get = ClientRequest::GetPromptRequest(GetPromptRequest::new(params));
        let answering = Answering::of(&context, &self.session);
        let got = async {
            let forwarded =
                match mrtr::exchange(&self.state, &target, get.into(), answering).await? {
                    Exchange::Done(forwarded) => forwarded,
                    Exchange::InputRequired(asked) => {
                        return Ok(GetPromptResponse::InputRequired(asked));
                    }
                };
            answer(forwarded, |result| match result {
                ServerResult::GetPromptResult(mut result) => {
                    complete(&mut result.result_type);
                    Some(GetPromptResponse::Complete(result))
                }
                _ => None,
            })
        };
        used.ended(got.await)
    }

    async fn serve_read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let exposed = request.uri.clone();
        let caller = caller_of(&context);
        let (target, used) = self
            .state
            .routed(
                &caller,
                ReadResourceRequestMethod::VALUE,
                (Kind::Resource, &exposed),
                |d| d.resource(&exposed),
            )
            .await
            .ok_or_else(|| unknown_resource(&exposed))?;
        let mut params = request;
        params.uri = target.name.clone();
        params.meta = None;
        let read = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(params));
        let legacy_client =
            Generation::of_agreed(context.protocol_version().as_ref()) == Generation::Sessions;
        let answering = Answering::of(&context, &self.session);
        let read = async {
            let forwarded =
                match mrtr::exchange(&self.state, &target, read.into(), answering).await? {
                    // A missing resource is -32002 for a 2025 client (rmcp turns it
                    // into -32602 for a 2026 one; a 2026 upstream sends -32602).
                    Exchange::Done(Forwarded::Error(mut error))
                        if legacy_client && is_resource_not_found(&error) =>
                    {
                        error.code = ErrorCode::RESOURCE_NOT_FOUND;
                        return Err(error);
                    }
                    Exchange::Done(forwarded) => forwarded,
                    Exchange::InputRequired(asked) => {
                        return Ok(ReadResourceResponse::InputRequired(asked));
                    }
                };
            answer(forwarded, |result| match result {
                ServerResult::ReadResourceResult(mut result) => {
                    complete(&mut result.result_type);
                    // Contents name the URI the client asked for.
                    for contents in &mut result.contents {
                        if let ResourceContents::TextResourceContents { uri, .. }
                        | ResourceContents::BlobResourceContents { uri, .. } = contents
                            && *uri == target.name
                        {
                            uri.clone_from(&exposed);
                        }
                    }
                    Some(ReadResourceResponse::Complete(result))
                }
                _ => None,
            })
        };
        used.ended(read.await)
    }

    async fn serve_complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let mut params = request;
        params.meta = None;
        let caller = caller_of(&context);
        let method = CompleteRequestMethod::VALUE;
        let (target, used) = match &mut params.r#ref {
            Reference::Prompt(prompt) => {
                let name = prompt.name.clone();
                let routed = self
                    .state
                    .routed(&caller, method, (Kind::Prompt, &name), |d| {
                        d.prompt(&name).cloned()
                    })
                    .await;
                let (target, used) = routed.ok_or_else(|| unknown_prompt(&name))?;
                prompt.name = target.name.clone();
                (target, used)
            }
            Reference::Resource(resource) => {
                let uri = resource.uri.clone();
                let routed = self
                    .state
                    .routed(&caller, method, (Kind::Resource, &uri), |d| {
                        d.template(&uri).cloned().or_else(|| d.resource(&uri))
                    })
                    .await;
                let (target, used) = routed.ok_or_else(|| unknown_resource(&uri))?;
                resource.uri = target.name.clone();
                (target, used)
            }
            _ => {
                return Err(ErrorData::invalid_params(
                    "unsupported completion reference",
                    None,
                ));
            }
        };
        let request = ClientRequest::CompleteRequest(CompleteRequest::new(params));
        let completed = answer(
            self.forward(&target, request, &context).await,
            |result| match result {
                ServerResult::CompleteResult(mut result) => {
                    complete(&mut result.result_type);
                    Some(result)
                }
                _ => None,
            },
        );
        used.ended(completed)
    }

    /// Sends a `tasks/*` request to the connection that runs its task.
    async fn forward_task(
        &self,
        task_id: &str,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let Some(connection) = self.state.task_connection(task_id, &caller_of(context)) else {
            return Err(ErrorData::invalid_params(
                format!("Unknown task '{task_id}'."),
                Some(serde_json::json!({ "taskId": task_id })),
            ));
        };
        let target = Target {
            connection,
            name: task_id.to_owned(),
        };
        answer(self.forward(&target, request, context).await, Some)
    }
}

fn cursor(request: &Option<PaginatedRequestParams>) -> Option<&str> {
    request.as_ref().and_then(|params| params.cursor.as_deref())
}
