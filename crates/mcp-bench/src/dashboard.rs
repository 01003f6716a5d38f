//! P10, the dashboard at scale (docs/BENCHMARKS.md, "Targets"): a gateway
//! with [`CONNECTIONS`] HTTP connections to one upstream that lists
//! [`TOOLS_PER_CONNECTION`] tools (20,000 in all), every catalog loaded
//! through the gateway's `tools/list` (the dashboard never loads one), then
//!
//! - **the page**: how long the server takes to answer `/`,
//!   `/tools?q=ledger` and `/dashboard/api/rows`, and how soon headless
//!   Chromium has the overview interactive (the `mcp-dashboard-ready` mark
//!   its script sets, in ms since navigation start);
//! - **the feed**, once the gateway is quiet again ([`Quiet`]): its CPU
//!   idle, with one `/events` reader and no calls, and then while one tool
//!   call a second goes through it, in alternating windows without a
//!   listener (A) and with one `/events` reader (B).
//!
//! This module measures; `Bench::p10` (scenarios.rs) judges and reports.

use std::{
    fmt::Write as _,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use mcp_test_support::browser::Browser;
use rmcp::{RoleClient, model::CallToolRequestParams, service::Peer};
use serde_json::{Value, json};
use tokio::{sync::oneshot, task::JoinHandle};

use crate::{
    measure,
    procs::{self, Binaries},
    worker::{Client, raw_session},
};

/// Connections in the gateway's config, `c0000` … `c0999`.
pub(crate) const CONNECTIONS: usize = 1_000;
/// Tools each connection lists: the test server's 7 and 13 extra ones.
pub(crate) const TOOLS_PER_CONNECTION: usize = 20;
const EXTRA_TOOLS: &str = "13";
/// Calls in a row to one connection: the first fails and parks it, the
/// second revives it (its park has ended) and succeeds, as do the rest.
const GROUP: u64 = 5;
/// The read-only tool the upstream's fault script answers with a 503: a
/// call-phase failure of a tool that may be retried, which parks the
/// connection once its one attempt is spent.
const FAILING_TOOL: &str = "lookup";
/// How long every catalog may take to load.
const LOAD_WITHIN: Duration = Duration::from_secs(180);
/// Between windows: the gateway notices a reader that left only when it
/// next writes to it (a frame a second), and a park's revive settles.
const SETTLE: Duration = Duration::from_secs(3);
/// How long to wait for the gateway to close the idle upstream connections
/// the loading left (they idle out after 90 s).
const QUIET_WITHIN: Duration = Duration::from_secs(150);
/// Descriptors the gateway holds beyond one per connection (its listen
/// stream) once quiet: listeners, the log, a few pooled connections.
const QUIET_SPARE_FDS: usize = 100;
/// How long a page load, its mark or its first frame may take.
const PAGE_WITHIN: Duration = Duration::from_secs(20);

/// Sets `window.__mcpBenchLive` (ms since navigation start) when the page
/// has applied its first live frame (its script sets `data-live="on"` on
/// the body then). Installed before any script of every new document.
const LIVE_PROBE: &str = "new MutationObserver((_, observer) => {\
     if (document.body && document.body.dataset.live === 'on') {\
       window.__mcpBenchLive = performance.now(); observer.disconnect();\
     }\
   }).observe(document, { subtree: true, attributes: true, attributeFilter: ['data-live'] });";

/// How long and how often.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// One measured window: the idle baseline, and each A and B phase.
    pub(crate) window: Duration,
    /// A-then-B pairs of phases.
    pub(crate) pairs: usize,
    /// Loads of the overview in Chromium.
    pub(crate) page_loads: usize,
    /// Timed requests per page (reqwest).
    pub(crate) fetches: usize,
}

impl Plan {
    pub(crate) fn new(quick: bool) -> Self {
        Plan {
            // At one update a second a window of 5 s sees 4 or 5 of them,
            // too few to tell 0.9 frames/s from 1; 10 s sees 9 or 10.
            window: Duration::from_secs(if quick { 10 } else { 20 }),
            pairs: 2,
            page_loads: if quick { 3 } else { 5 },
            fetches: 20,
        }
    }
}

/// The gateway's CPU over a stretch of wall time.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuWindow {
    pub(crate) wall: Duration,
    pub(crate) cpu: Duration,
}

impl CpuWindow {
    /// CPU as a percentage of one core.
    pub(crate) fn percent(&self) -> f64 {
        100.0 * self.cpu.as_secs_f64() / self.wall.as_secs_f64().max(1e-9)
    }

    /// Several windows taken as one.
    pub(crate) fn total<'a>(windows: impl IntoIterator<Item = &'a CpuWindow>) -> CpuWindow {
        windows
            .into_iter()
            .fold(CpuWindow::default(), |sum, window| CpuWindow {
                wall: sum.wall + window.wall,
                cpu: sum.cpu + window.cpu,
            })
    }
}

/// One A (no listener) or B (one `/events` reader) window.
#[derive(Debug, Clone)]
pub(crate) struct Phase {
    pub(crate) cpu: CpuWindow,
    /// Calls made during the window that were answered, and that failed.
    pub(crate) answered: u64,
    pub(crate) failed: u64,
    /// B: what the reader received.
    pub(crate) feed: Option<FeedWindow>,
}

/// What a B window's reader received.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FeedWindow {
    /// The first frame (every row), in bytes as sent (the SSE event).
    pub(crate) first_bytes: u64,
    /// The gateway's CPU from the request to the first frame's arrival.
    pub(crate) join_cpu: Duration,
    /// `rows` frames after the first, within the window, and their bytes.
    pub(crate) frames: u64,
    pub(crate) bytes: u64,
    /// `resync` events (the reader fell behind).
    pub(crate) resyncs: u64,
}

/// A page timed with reqwest: the median time to its last byte, its size,
/// and the gateway's CPU per request.
#[derive(Debug, Clone)]
pub(crate) struct Fetched {
    pub(crate) path: &'static str,
    pub(crate) median: Duration,
    pub(crate) bytes: usize,
    pub(crate) cpu: Duration,
}

/// The admin API's pages timed: the overview, a search over every tool,
/// and every row as JSON (what a page that fell behind fetches; the same
/// work as one of the feed's refreshes, with every row serialized).
const FETCHED: [&str; 3] = ["/", "/tools?q=ledger", "/dashboard/api/rows"];

/// One load of the overview in Chromium, in ms since navigation start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PageLoad {
    /// The `mcp-dashboard-ready` mark: the script has set itself up.
    pub(crate) ready_ms: f64,
    /// The first live frame (every row) applied.
    pub(crate) live_ms: f64,
    /// The HTML's last byte (navigation timing's `responseEnd`).
    pub(crate) response_end_ms: f64,
}

/// What the browser part came to.
#[derive(Debug, Clone)]
pub(crate) enum Pages {
    Loaded {
        loads: Vec<PageLoad>,
        /// Errors the page logged (none expected).
        console_errors: Vec<String>,
    },
    /// No Chromium (or chromedriver) to drive: a finding, not a failure.
    NoBrowser(String),
    /// The browser ran, but a load did not finish.
    Failed(String),
}

/// How the catalogs were loaded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Loaded {
    /// How long the first `tools/list` through the gateway took.
    pub(crate) list_took: Duration,
    /// Tools it returned.
    pub(crate) listed: usize,
    /// From its start to every catalog shown in `/status`.
    pub(crate) all_in: Duration,
}

/// The gateway after loading, once the upstream connections the loading
/// opened and left idle were closed (reqwest's pool closes a connection
/// idle for 90 s: about 2,400 of them here, a burst of CPU that would land
/// in whichever window it fell in).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Quiet {
    /// How long after loading (and the page timings) that came.
    pub(crate) after: Duration,
    /// The gateway's open descriptors then.
    pub(crate) fds: usize,
    /// Whether it came at all within [`QUIET_WITHIN`].
    pub(crate) reached: bool,
}

/// Everything P10 measured.
#[derive(Debug, Clone)]
pub(crate) struct Measured {
    /// The soft open-file limit the processes ran with.
    pub(crate) fd_limit: u64,
    /// From spawning the gateway to its announcing both listeners.
    pub(crate) started_in: Duration,
    pub(crate) loaded: Loaded,
    /// Open descriptors of the gateway and the upstream once loaded.
    pub(crate) fds: (usize, usize),
    /// The gateway's resident memory once loaded, in KiB.
    pub(crate) rss_kib: u64,
    /// When the windows began.
    pub(crate) quiet: Quiet,
    /// No calls, no listener.
    pub(crate) idle: CpuWindow,
    /// No calls, one `/events` reader: the feed's refresh every second
    /// alone, with (almost) nothing changing.
    pub(crate) idle_listening: Phase,
    /// A, B, A, B, …
    pub(crate) phases: Vec<Phase>,
    /// Parks during the phases (from `/status`).
    pub(crate) parks: u64,
    pub(crate) fetched: Vec<Fetched>,
    pub(crate) pages: Pages,
}

impl Measured {
    /// The A (`listening` false) or B windows.
    pub(crate) fn phases(&self, listening: bool) -> impl Iterator<Item = &Phase> {
        self.phases
            .iter()
            .filter(move |phase| phase.feed.is_some() == listening)
    }

    /// The gateway's CPU with one reader minus without, as a percentage of
    /// one core.
    pub(crate) fn delta_percent(&self) -> f64 {
        let cpu = |listening| CpuWindow::total(self.phases(listening).map(|phase| &phase.cpu));
        cpu(true).percent() - cpu(false).percent()
    }

    /// Every B window's reader, with the window's wall time.
    pub(crate) fn feeds(&self) -> impl Iterator<Item = (&FeedWindow, Duration)> {
        self.phases
            .iter()
            .filter_map(|phase| Some((phase.feed.as_ref()?, phase.cpu.wall)))
    }
}

/// Starts the upstream and the gateway and measures everything.
pub(crate) fn run(bins: &Binaries, scratch: &Path, plan: Plan) -> anyhow::Result<Measured> {
    let fd_limit = raise_fd_limit();
    let upstream = procs::start_upstream_with(
        bins,
        &["--extra-tools", EXTRA_TOOLS],
        &scratch.join("p10-upstream.log"),
    )?;
    let spawned = Instant::now();
    let gateway =
        procs::start_gateway_config(bins, scratch, "p10-gateway", &config(&upstream.url))?;
    let started_in = spawned.elapsed();
    let scene = Scene {
        http: reqwest::Client::builder().tcp_nodelay(true).build()?,
        gateway_pid: gateway.pid(),
        upstream_pid: upstream.pid(),
        gateway_url: gateway.urls[0].clone(),
        admin: gateway.urls[1].clone(),
        control: upstream
            .url
            .strip_suffix("/mcp")
            .unwrap_or(&upstream.url)
            .to_owned(),
        fd_limit,
        started_in,
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(scene.measure(plan))
}

/// The gateway's config: every connection to `upstream`, one attempt per
/// operation and a first park of 0.5 s, so a failed call parks its
/// connection and the next call, a second later, revives it.
fn config(upstream: &str) -> String {
    let mut text = String::from(
        "[supervisor]\nmax_attempts = 1\n\n\
         [supervisor.quarantine]\nbase_cooldown = \"500ms\"\n\n\
         [gateway]\nlisten = \"127.0.0.1:0\"\nexpose = \"namespaced\"\n\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n",
    );
    for n in 0..CONNECTIONS {
        let _ = write!(
            text,
            "\n[connections.{}]\ntransport = \"http\"\nurl = \"{upstream}\"\n",
            connection(n)
        );
    }
    text
}

pub(crate) fn connection(n: usize) -> String {
    format!("c{n:04}")
}

/// Raises this process's soft open-file limit to its hard one (at most
/// 65,536) for the children to inherit: the gateway and the upstream each
/// hold a socket or more per upstream session. The soft limit in effect.
pub(crate) fn raise_fd_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 0;
    };
    let want = hard.min(65_536);
    if want > soft && setrlimit(Resource::RLIMIT_NOFILE, want, hard).is_ok() {
        want
    } else {
        soft
    }
}

/// The connections of the admin API at `admin`'s `/status`, as listed.
pub(crate) async fn statuses(http: &reqwest::Client, admin: &str) -> anyhow::Result<Vec<Value>> {
    let mut status: Value = http
        .get(format!("{admin}/status"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    match status["connections"].take() {
        Value::Array(connections) => Ok(connections),
        other => bail!("/status has no connections: {other}"),
    }
}

/// Descriptors `pid` holds open.
pub(crate) fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// The processes P10 measures, and how to reach them.
struct Scene {
    http: reqwest::Client,
    gateway_pid: u32,
    upstream_pid: u32,
    /// The gateway's MCP endpoint.
    gateway_url: String,
    /// The admin API (and dashboard).
    admin: String,
    /// The upstream's origin, for `/_control/faults`.
    control: String,
    /// The soft open-file limit the processes run with.
    fd_limit: u64,
    /// From spawning the gateway to its announcing both listeners.
    started_in: Duration,
}

impl Scene {
    async fn measure(&self, plan: Plan) -> anyhow::Result<Measured> {
        self.fail_tool().await?;
        let session = raw_session(Client::RawPooled, &self.gateway_url).await?;
        let loaded = self.load_catalogs(session.peer()).await?;
        eprintln!("  {CONNECTIONS} catalogs loaded in {:.1?}", loaded.all_in);
        let fds = (open_fds(self.gateway_pid), open_fds(self.upstream_pid));
        let rss_kib =
            measure::status_field(&format!("/proc/{}/status", self.gateway_pid), "VmRSS:")
                .unwrap_or(0);
        let mut fetched = Vec::new();
        for path in FETCHED {
            fetched.push(self.time_page(path, plan.fetches).await?);
        }
        let pages = page_loads(&self.admin, plan.page_loads).await;
        let quiet = self.await_quiet().await;
        eprintln!(
            "  the gateway closed its idle upstream connections after {:.0?}",
            quiet.after
        );
        let idle = self.cpu_window(plan.window).await;
        let calls = Arc::new(Calls::default());
        let idle_listening = self.phase(&calls, true, plan.window).await?;
        eprintln!(
            "  no calls: {:.2} % of a core without a listener, {:.2} % with one",
            idle.percent(),
            idle_listening.cpu.percent()
        );

        let driver = tokio::spawn(drive_calls(session.peer().clone(), calls.clone()));
        tokio::time::sleep(SETTLE).await;
        let parks_before = self.parks().await?;
        let mut phases = Vec::new();
        for pair in 1..=plan.pairs {
            for listening in [false, true] {
                let phase = self.phase(&calls, listening, plan.window).await?;
                eprintln!(
                    "  {} {pair}: {:.2} % of a core, {} calls ({} failed){}",
                    if listening {
                        "B (one /events reader)"
                    } else {
                        "A (no listener)       "
                    },
                    phase.cpu.percent(),
                    phase.answered + phase.failed,
                    phase.failed,
                    phase.feed.map_or(String::new(), |feed| format!(
                        ", {} frames, {} bytes",
                        feed.frames, feed.bytes
                    )),
                );
                phases.push(phase);
            }
        }
        driver.abort();
        let parks = self.parks().await?.saturating_sub(parks_before);
        let _ = session.cancel().await;
        Ok(Measured {
            fd_limit: self.fd_limit,
            started_in: self.started_in,
            loaded,
            fds,
            rss_kib,
            quiet,
            idle,
            idle_listening,
            phases,
            parks,
            fetched,
            pages,
        })
    }

    /// Makes the upstream answer every call of [`FAILING_TOOL`] with a 503.
    async fn fail_tool(&self) -> anyhow::Result<()> {
        self.http
            .post(format!("{}/_control/faults", self.control))
            .json(&json!([{
                "when": { "tool": FAILING_TOOL },
                "fault": { "kind": "status", "status": 503 },
            }]))
            .send()
            .await?
            .error_for_status()
            .context("setting the upstream's fault script")?;
        Ok(())
    }

    /// Lists the gateway's tools (which loads every connection's catalog)
    /// until `/status` shows every catalog.
    async fn load_catalogs(&self, peer: &Peer<RoleClient>) -> anyhow::Result<Loaded> {
        let started = Instant::now();
        let mut first = None;
        loop {
            let listed = peer
                .list_all_tools()
                .await
                .context("tools/list through the gateway")?
                .len();
            let (list_took, listed) = *first.get_or_insert((started.elapsed(), listed));
            let poll_until = Instant::now() + Duration::from_secs(20);
            loop {
                let counts: Vec<Option<u64>> = self
                    .statuses()
                    .await?
                    .iter()
                    .map(|status| status["tool_count"].as_u64())
                    .collect();
                if let Some(odd) = counts
                    .iter()
                    .flatten()
                    .find(|count| **count != TOOLS_PER_CONNECTION as u64)
                {
                    bail!("a catalog lists {odd} tools, not {TOOLS_PER_CONNECTION}");
                }
                let loaded = counts.iter().flatten().count();
                if loaded == CONNECTIONS {
                    return Ok(Loaded {
                        list_took,
                        listed,
                        all_in: started.elapsed(),
                    });
                }
                if started.elapsed() > LOAD_WITHIN {
                    bail!("only {loaded} of {CONNECTIONS} catalogs loaded within {LOAD_WITHIN:?}");
                }
                if Instant::now() >= poll_until {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }

    /// Waits until the gateway holds about one descriptor per connection
    /// (see [`Quiet`]), then [`SETTLE`] more.
    async fn await_quiet(&self) -> Quiet {
        let started = Instant::now();
        let quiet = loop {
            let fds = open_fds(self.gateway_pid);
            let reached = fds <= CONNECTIONS + QUIET_SPARE_FDS;
            if reached || started.elapsed() >= QUIET_WITHIN {
                break Quiet {
                    after: started.elapsed(),
                    fds,
                    reached,
                };
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        tokio::time::sleep(SETTLE).await;
        quiet
    }

    /// `/status`'s connections.
    async fn statuses(&self) -> anyhow::Result<Vec<Value>> {
        statuses(&self.http, &self.admin).await
    }

    /// Parks so far, every connection's together.
    async fn parks(&self) -> anyhow::Result<u64> {
        Ok(self
            .statuses()
            .await?
            .iter()
            .filter_map(|status| status["parks"].as_u64())
            .sum())
    }

    fn cpu(&self) -> Duration {
        measure::other_process_cpu(self.gateway_pid).unwrap_or_default()
    }

    async fn cpu_window(&self, length: Duration) -> CpuWindow {
        let (started, before) = (Instant::now(), self.cpu());
        tokio::time::sleep(length).await;
        CpuWindow {
            wall: started.elapsed(),
            cpu: self.cpu().saturating_sub(before),
        }
    }

    /// One window while the calls go on, with one `/events` reader
    /// (`listening`, from its first frame on) or none.
    async fn phase(
        &self,
        calls: &Calls,
        listening: bool,
        length: Duration,
    ) -> anyhow::Result<Phase> {
        let reader = if listening {
            Some(self.open_feed().await?)
        } else {
            None
        };
        let received = || reader.as_ref().map(|reader| reader.tally.read());
        let (feed_before, calls_before) = (received(), calls.read());
        let cpu = self.cpu_window(length).await;
        let (feed_after, calls_after) = (received(), calls.read());
        if let Some(reader) = &reader {
            reader.task.abort();
        }
        let feed = reader
            .zip(feed_before.zip(feed_after))
            .map(|(reader, (before, after))| FeedWindow {
                first_bytes: reader.first_bytes,
                join_cpu: reader.join_cpu,
                frames: after.frames - before.frames,
                bytes: after.bytes - before.bytes,
                resyncs: after.resyncs - before.resyncs,
            });
        tokio::time::sleep(SETTLE).await;
        Ok(Phase {
            cpu,
            answered: calls_after.0 - calls_before.0,
            failed: calls_after.1 - calls_before.1,
            feed,
        })
    }

    /// Opens `/events` and waits for its first frame.
    async fn open_feed(&self) -> anyhow::Result<Reader> {
        let before = self.cpu();
        let response = self
            .http
            .get(format!("{}/events", self.admin))
            .send()
            .await?
            .error_for_status()
            .context("GET /events")?;
        let tally = Arc::new(Tally::default());
        let (first_tx, first_rx) = oneshot::channel();
        let task = tokio::spawn(read_events(response, tally.clone(), first_tx));
        let first_bytes = tokio::time::timeout(PAGE_WITHIN, first_rx)
            .await
            .context("no first frame from /events")?
            .context("/events ended before its first frame")?;
        Ok(Reader {
            task,
            tally,
            first_bytes,
            join_cpu: self.cpu().saturating_sub(before),
        })
    }

    /// `GET path` on the admin API `times` times, one after the other.
    async fn time_page(&self, path: &'static str, times: usize) -> anyhow::Result<Fetched> {
        let url = format!("{}{path}", self.admin);
        let mut took = Vec::with_capacity(times);
        let mut bytes = 0;
        let cpu_before = self.cpu();
        for _ in 0..times {
            let started = Instant::now();
            let body = self
                .http
                .get(&url)
                .timeout(PAGE_WITHIN)
                .send()
                .await?
                .error_for_status()
                .with_context(|| format!("GET {path}"))?
                .bytes()
                .await?;
            took.push(started.elapsed());
            bytes = body.len();
        }
        let cpu = self.cpu().saturating_sub(cpu_before) / times.max(1) as u32;
        took.sort();
        Ok(Fetched {
            path,
            median: took[took.len() / 2],
            bytes,
            cpu,
        })
    }
}

/// Calls made so far.
#[derive(Debug, Default)]
struct Calls {
    answered: AtomicU64,
    failed: AtomicU64,
}

impl Calls {
    /// Answered, failed.
    fn read(&self) -> (u64, u64) {
        (
            self.answered.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

/// The load: one call a second through the gateway, [`GROUP`] in a row to
/// each connection in turn, the first of each group to [`FAILING_TOOL`]
/// (503: the connection parks), the rest `echo` (the first revives it).
async fn drive_calls(peer: Peer<RoleClient>, calls: Arc<Calls>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for n in 0u64.. {
        tick.tick().await;
        let target = connection((n / GROUP) as usize % CONNECTIONS);
        let (tool, arguments) = if n % GROUP == 0 {
            (FAILING_TOOL, json!({ "key": "k" }))
        } else {
            ("echo", json!({ "text": "hello" }))
        };
        let mut params = CallToolRequestParams::new(format!("{target}__{tool}"));
        params.arguments = arguments.as_object().cloned();
        let counter = match peer.call_tool(params).await {
            Ok(result) if result.is_error != Some(true) => &calls.answered,
            _ => &calls.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// An open `/events` stream being read.
struct Reader {
    task: JoinHandle<()>,
    tally: Arc<Tally>,
    first_bytes: u64,
    join_cpu: Duration,
}

/// What a reader received after its first frame.
#[derive(Debug, Default)]
struct Tally {
    frames: AtomicU64,
    bytes: AtomicU64,
    resyncs: AtomicU64,
}

impl Tally {
    /// So far, as a window's numbers.
    fn read(&self) -> FeedWindow {
        FeedWindow {
            first_bytes: 0,
            join_cpu: Duration::ZERO,
            frames: self.frames.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            resyncs: self.resyncs.load(Ordering::Relaxed),
        }
    }
}

/// Reads server-sent events to the stream's end: the first `rows` frame's
/// size goes to `first`, the rest are counted in `tally`.
async fn read_events(
    mut response: reqwest::Response,
    tally: Arc<Tally>,
    first: oneshot::Sender<u64>,
) {
    let mut first = Some(first);
    let mut events = Events::default();
    while let Ok(Some(chunk)) = response.chunk().await {
        events.push(&chunk);
        while let Some(event) = events.next_event() {
            let bytes = event.len() as u64;
            match event_name(&event) {
                Some(b"rows") => match first.take() {
                    Some(first) => {
                        let _ = first.send(bytes);
                    }
                    None => {
                        tally.frames.fetch_add(1, Ordering::Relaxed);
                        tally.bytes.fetch_add(bytes, Ordering::Relaxed);
                    }
                },
                Some(b"resync") => {
                    tally.resyncs.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            }
        }
    }
}

/// A server-sent event stream cut into events (each ends with a blank
/// line) as its chunks arrive.
#[derive(Debug, Default)]
struct Events {
    pending: Vec<u8>,
    /// Where the search for the next event's end resumes.
    searched: usize,
}

impl Events {
    fn push(&mut self, chunk: &[u8]) {
        self.pending.extend_from_slice(chunk);
    }

    /// The next whole event, its blank line included.
    fn next_event(&mut self) -> Option<Vec<u8>> {
        let found = self.pending[self.searched..]
            .windows(2)
            .position(|pair| pair == b"\n\n");
        match found {
            Some(at) => {
                let end = self.searched + at + 2;
                self.searched = 0;
                Some(self.pending.drain(..end).collect())
            }
            None => {
                // The last byte may be the first of an end.
                self.searched = self.pending.len().saturating_sub(1);
                None
            }
        }
    }
}

/// The `event:` field of an event (`None`: a comment, such as a keep-alive).
fn event_name(event: &[u8]) -> Option<&[u8]> {
    event
        .split(|byte| *byte == b'\n')
        .find_map(|line| line.strip_prefix(b"event: "))
}

/// Loads the overview `loads` times in headless Chromium.
async fn page_loads(admin: &str, loads: usize) -> Pages {
    let browser = match Browser::start().await {
        Ok(browser) => browser,
        Err(error) => return Pages::NoBrowser(format!("{error:#}")),
    };
    let timed = async {
        browser
            .cdp(
                "Page.addScriptToEvaluateOnNewDocument",
                json!({ "source": LIVE_PROBE }),
            )
            .await?;
        let number = |value: Value| value.as_f64().context("not a number");
        let mut timed = Vec::with_capacity(loads);
        for _ in 0..loads {
            browser.goto(&format!("{admin}/")).await?;
            let ready = browser
                .wait_for(
                    "performance.getEntriesByName('mcp-dashboard-ready')[0]?.startTime",
                    PAGE_WITHIN,
                )
                .await?;
            let live = browser
                .wait_for("window.__mcpBenchLive", PAGE_WITHIN)
                .await?;
            let response_end = browser
                .execute(
                    "return performance.getEntriesByType('navigation')[0].responseEnd;",
                    Vec::new(),
                )
                .await?;
            timed.push(PageLoad {
                ready_ms: number(ready)?,
                live_ms: number(live)?,
                response_end_ms: number(response_end)?,
            });
        }
        anyhow::Ok((timed, browser.console_errors().await?))
    }
    .await;
    let _ = browser.quit().await;
    match timed {
        Ok((loads, console_errors)) => Pages::Loaded {
            loads,
            console_errors,
        },
        Err(error) => Pages::Failed(format!("{error:#}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_cut_at_blank_lines_across_chunks() {
        let mut events = Events::default();
        events.push(b"event: rows\ndata: {}\n");
        assert_eq!(events.next_event(), None);
        events.push(b"\n:\n\nevent: resync\ndata: {}\n\nevent: ro");
        let first = events.next_event().unwrap();
        assert_eq!(first, b"event: rows\ndata: {}\n\n");
        assert_eq!(event_name(&first), Some(&b"rows"[..]));
        assert_eq!(
            event_name(&events.next_event().unwrap()),
            None,
            "a keep-alive"
        );
        assert_eq!(
            event_name(&events.next_event().unwrap()),
            Some(&b"resync"[..])
        );
        assert_eq!(events.next_event(), None);
        events.push(b"ws\ndata: {}\n\n");
        assert_eq!(
            event_name(&events.next_event().unwrap()),
            Some(&b"rows"[..])
        );
    }
}
