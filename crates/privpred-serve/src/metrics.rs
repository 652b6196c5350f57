//! Prometheus text-format metrics (exposition format 0.0.4), kept with atomics.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds (seconds) of the latency histogram buckets.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Service counters.
#[derive(Default)]
pub struct Metrics {
    /// Requests by route index and status class.
    requests: [[AtomicU64; 5]; 6],
    /// Answers released (fresh + stored).
    pub answers: AtomicU64,
    /// Answers that were stored earlier answers (no budget spent).
    pub answers_stored: AtomicU64,
    /// Refusals: budget exhausted.
    pub refusals_budget: AtomicU64,
    /// Refusals: ledger unavailable (fail closed).
    pub refusals_ledger: AtomicU64,
    /// Refusals: malformed or invalid request.
    pub refusals_invalid: AtomicU64,
    /// Refusals: missing or wrong token.
    pub refusals_auth: AtomicU64,
    /// Connections refused because the server held its most connections.
    pub refusals_connections: AtomicU64,
    /// Last known budget (total, spent) from the ledger; u64::MAX = unknown/unlimited.
    pub budget_total: AtomicU64,
    /// See `budget_total`.
    pub budget_spent: AtomicU64,
    latency_buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    latency_count: AtomicU64,
    latency_sum_us: AtomicU64,
}

/// Why a request was refused (one counter each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Missing or wrong token.
    Auth,
    /// Malformed or invalid request.
    Invalid,
    /// Budget exhausted.
    Budget,
    /// Ledger unavailable (fail closed).
    Ledger,
}

/// What happened while serving a request: the handlers report events, [`Metrics::observe`]
/// turns them into counters (the handlers never touch a counter themselves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A request was refused.
    Refused(Refusal),
    /// Answers were released: `answers` in all, `stored` of them earlier stored answers.
    Answered {
        /// Answers released (fresh + stored).
        answers: u64,
        /// Of those, stored answers (no budget spent).
        stored: u64,
    },
    /// The ledger reported the budget's state.
    Budget {
        /// The budget B.
        total: u64,
        /// Answers spent so far.
        spent: u64,
    },
}

/// Route labels, in index order.
pub const ROUTES: [&str; 6] = [
    "/v1/predict",
    "/v1/model",
    "/healthz",
    "/metrics",
    "/openapi.json",
    "other",
];

impl Metrics {
    /// A zeroed set of counters.
    pub fn new() -> Self {
        let m = Metrics::default();
        m.budget_total.store(u64::MAX, Ordering::Relaxed);
        m
    }

    /// Updates the counters for one event.
    pub fn observe(&self, event: Event) {
        match event {
            Event::Refused(r) => {
                let c = match r {
                    Refusal::Auth => &self.refusals_auth,
                    Refusal::Invalid => &self.refusals_invalid,
                    Refusal::Budget => &self.refusals_budget,
                    Refusal::Ledger => &self.refusals_ledger,
                };
                c.fetch_add(1, Ordering::Relaxed);
            }
            Event::Answered { answers, stored } => {
                self.answers.fetch_add(answers, Ordering::Relaxed);
                self.answers_stored.fetch_add(stored, Ordering::Relaxed);
            }
            Event::Budget { total, spent } => {
                self.budget_total.store(total, Ordering::Relaxed);
                self.budget_spent.fetch_max(spent, Ordering::Relaxed);
            }
        }
    }

    /// Records one request's route and status.
    pub fn record_request(&self, path: &str, status: u16) {
        let r = ROUTES
            .iter()
            .position(|p| *p == path)
            .unwrap_or(ROUTES.len() - 1);
        let c = (status / 100).clamp(1, 5) as usize - 1;
        self.requests[r][c].fetch_add(1, Ordering::Relaxed);
    }

    /// Records one prediction request's latency.
    pub fn record_latency(&self, seconds: f64) {
        for (i, b) in LATENCY_BUCKETS.iter().enumerate() {
            if seconds <= *b {
                self.latency_buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.latency_count.fetch_add(1, Ordering::Relaxed);
        self.latency_sum_us
            .fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
    }

    /// Renders the Prometheus text format.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        s.push_str("# HELP privpred_requests_total HTTP requests by route and status class.\n");
        s.push_str("# TYPE privpred_requests_total counter\n");
        for (r, route) in ROUTES.iter().enumerate() {
            for c in 0..5 {
                let _ = writeln!(
                    s,
                    "privpred_requests_total{{route=\"{route}\",code=\"{}xx\"}} {}",
                    c + 1,
                    ld(&self.requests[r][c])
                );
            }
        }
        s.push_str(
            "# HELP privpred_answers_total Answers released (including stored earlier answers).\n",
        );
        s.push_str("# TYPE privpred_answers_total counter\n");
        let _ = writeln!(s, "privpred_answers_total {}", ld(&self.answers));
        s.push_str("# HELP privpred_answers_stored_total Answers served from the answer store (no budget spent).\n");
        s.push_str("# TYPE privpred_answers_stored_total counter\n");
        let _ = writeln!(
            s,
            "privpred_answers_stored_total {}",
            ld(&self.answers_stored)
        );
        s.push_str("# HELP privpred_refusals_total Refused prediction requests by reason.\n");
        s.push_str("# TYPE privpred_refusals_total counter\n");
        for (reason, v) in [
            ("budget_exhausted", &self.refusals_budget),
            ("ledger_unavailable", &self.refusals_ledger),
            ("invalid_request", &self.refusals_invalid),
            ("unauthorized", &self.refusals_auth),
            ("too_many_connections", &self.refusals_connections),
        ] {
            let _ = writeln!(
                s,
                "privpred_refusals_total{{reason=\"{reason}\"}} {}",
                ld(v)
            );
        }
        let total = ld(&self.budget_total);
        s.push_str("# HELP privpred_budget_total The inference budget B (+Inf for private-training methods).\n");
        s.push_str("# TYPE privpred_budget_total gauge\n");
        s.push_str("# HELP privpred_budget_remaining Answers left in the budget as last recorded by this server.\n");
        s.push_str("# TYPE privpred_budget_remaining gauge\n");
        if total == u64::MAX {
            s.push_str("privpred_budget_total +Inf\nprivpred_budget_remaining +Inf\n");
        } else {
            let _ = writeln!(s, "privpred_budget_total {total}");
            let _ = writeln!(
                s,
                "privpred_budget_remaining {}",
                total.saturating_sub(ld(&self.budget_spent))
            );
        }
        s.push_str("# HELP privpred_predict_duration_seconds Latency of POST /v1/predict.\n");
        s.push_str("# TYPE privpred_predict_duration_seconds histogram\n");
        for (i, b) in LATENCY_BUCKETS.iter().enumerate() {
            let _ = writeln!(
                s,
                "privpred_predict_duration_seconds_bucket{{le=\"{b}\"}} {}",
                ld(&self.latency_buckets[i])
            );
        }
        let count = ld(&self.latency_count);
        let _ = writeln!(
            s,
            "privpred_predict_duration_seconds_bucket{{le=\"+Inf\"}} {count}"
        );
        let _ = writeln!(
            s,
            "privpred_predict_duration_seconds_sum {}",
            ld(&self.latency_sum_us) as f64 / 1e6
        );
        let _ = writeln!(s, "privpred_predict_duration_seconds_count {count}");
        s
    }
}
