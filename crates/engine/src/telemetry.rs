//! Prometheus metrics: the names Mast records, and the process-wide recorder `/metrics`
//! renders. Counters and histograms are recorded where things happen; gauges that describe
//! state (runners, sessions by status, queue depth, stream subscribers) are read when scraped.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// HTTP requests by `route` (the matched path template), `method` and `status`.
pub const HTTP_REQUESTS: &str = "mast_http_requests_total";
/// HTTP request latency to the response head, by `route` and `method`.
pub const HTTP_DURATION: &str = "mast_http_request_duration_seconds";
/// Session runners alive in this process.
pub const ACTIVE_RUNNERS: &str = "mast_active_runners";
/// Sessions by `status`, across the store.
pub const SESSIONS: &str = "mast_sessions";
/// Leases this process took over from an owner whose lease had expired.
pub const LEASE_TAKEOVERS: &str = "mast_lease_takeovers_total";
/// Model request latency by `model` and `outcome` (`ok`, `error`, `interrupted`).
pub const MODEL_DURATION: &str = "mast_model_request_duration_seconds";
/// Model tokens by `model` and `kind` (`input`, `output`, `cache_read`).
pub const MODEL_TOKENS: &str = "mast_model_tokens_total";
/// Built-in tool latency by `tool`, and whether it ended in an error result.
pub const TOOL_DURATION: &str = "mast_tool_duration_seconds";
/// Stream (SSE) subscribers connected to this process.
pub const SSE_SUBSCRIBERS: &str = "mast_sse_subscribers";
/// Time to commit one session transaction (recorded by the store, which names it).
pub use mast_store::EVENT_APPEND_DURATION;
/// Session writes decided on a held copy of the row that had moved on meanwhile (or that the
/// decision refused: its refusal may not be the current row's), so they were decided again on
/// the locked row (`SessionTransactions::transact_from`), by `writer`: `runner` (the row its loop holds) or
/// `client` (input decided on the row a runner left, `engine::held_rows`).
pub const STALE_SESSION_WRITES: &str = "mast_stale_session_writes_total";
/// Self-hosted work items waiting for a worker, across the store.
pub const WORK_QUEUED: &str = "mast_work_queue_depth";
/// Hook lists read from the store (the rest are answered from the in-memory cache).
pub const HOOK_LIST_READS: &str = "mast_hook_list_reads_total";

/// Buckets for request-sized latencies (1 ms to 5 min).
const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0,
];

/// The process's recorder, installed on first use (several servers in one test process share
/// it).
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)
            .expect("valid buckets")
            .build_recorder();
        let handle = recorder.handle();
        if let Err(e) = metrics::set_global_recorder(recorder) {
            tracing::warn!(error = %e, "a metrics recorder was already installed");
        }
        handle
    })
}
