//! Progress as structured events (observer pattern): a progress bar on a terminal, plain log
//! lines otherwise, nothing in tests.

use crate::units::Group;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Instant;

/// What happens during a sweep.
#[derive(Debug)]
pub enum Event<'a> {
    /// The sweep starts: `total` units in this shard, `done` of them finished earlier.
    RunStarted {
        /// Units of this shard.
        total: usize,
        /// Units already finished (resume).
        done: usize,
    },
    /// A group starts computing `pending` repetitions.
    GroupStarted {
        /// The group.
        group: &'a Group,
        /// Repetitions to compute.
        pending: usize,
    },
    /// One unit finished.
    UnitFinished {
        /// Its group.
        group: &'a Group,
        /// The repetition.
        repetition: u32,
        /// Its accuracy.
        accuracy: f64,
    },
    /// A group finished.
    GroupFinished {
        /// The group.
        group: &'a Group,
        /// Wall seconds.
        seconds: f64,
    },
    /// A free-form note (data loading, shared fits, finalisation).
    Message(&'a str),
    /// The sweep finished.
    RunFinished {
        /// Wall seconds.
        seconds: f64,
    },
}

/// Receives sweep events. Must be callable from several threads.
pub trait Observer: Sync {
    /// Handles one event.
    fn on_event(&self, event: &Event<'_>);
}

/// Ignores every event.
pub struct Silent;

impl Observer for Silent {
    fn on_event(&self, _: &Event<'_>) {}
}

fn group_label(g: &Group) -> String {
    if g.series.starts_with("compare/") {
        // the user's own task: no figure ids, the method and the grid point in words
        let s = &g.setting;
        return format!(
            "{} (ε = {}, δ = {}, budget {} answers, {} calibration)",
            g.method, s.epsilon, s.delta, s.budget, g.calibration
        );
    }
    let id = g.id();
    let setting = id.rsplit(':').next().unwrap_or("").to_string();
    format!("{} {} {} {}", g.figure, g.calibration, g.method, setting)
}

/// Plain log lines on standard error (for files, CI logs and batch schedulers).
pub struct LogLines {
    state: Mutex<LogState>,
}

struct LogState {
    start: Instant,
    total: usize,
    done: usize,
    done_at_start: usize,
}

impl Default for LogLines {
    fn default() -> Self {
        LogLines {
            state: Mutex::new(LogState {
                start: Instant::now(),
                total: 0,
                done: 0,
                done_at_start: 0,
            }),
        }
    }
}

fn eta(st: &LogState) -> String {
    let new = st.done.saturating_sub(st.done_at_start);
    if new == 0 {
        return "?".into();
    }
    let per = st.start.elapsed().as_secs_f64() / new as f64;
    let left = per * st.total.saturating_sub(st.done) as f64;
    format_secs(left)
}

/// Formats seconds as `1h02m`, `3m05s` or `12.3s`.
pub fn format_secs(s: f64) -> String {
    if s >= 3600.0 {
        format!(
            "{}h{:02}m",
            (s / 3600.0) as u64,
            ((s % 3600.0) / 60.0) as u64
        )
    } else if s >= 60.0 {
        format!("{}m{:02}s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else {
        format!("{s:.1}s")
    }
}

impl Observer for LogLines {
    fn on_event(&self, event: &Event<'_>) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match event {
            Event::RunStarted { total, done } => {
                st.start = Instant::now();
                st.total = *total;
                st.done = *done;
                st.done_at_start = *done;
                eprintln!("sweep: {total} units, {done} already finished");
            }
            Event::GroupStarted { group, pending } => {
                eprintln!(
                    "[{}/{}] {}: {pending} repetitions",
                    st.done,
                    st.total,
                    group_label(group)
                );
            }
            Event::UnitFinished { .. } => st.done += 1,
            Event::GroupFinished { group, seconds } => {
                eprintln!(
                    "[{}/{}] {} done in {} (ETA {})",
                    st.done,
                    st.total,
                    group_label(group),
                    format_secs(*seconds),
                    eta(&st)
                );
            }
            Event::Message(m) => eprintln!("{m}"),
            Event::RunFinished { seconds } => {
                eprintln!("sweep finished in {}", format_secs(*seconds))
            }
        }
    }
}

/// An indicatif progress bar: current figure, setting, units done and ETA.
pub struct Bar {
    bar: ProgressBar,
}

impl Default for Bar {
    fn default() -> Self {
        let bar = ProgressBar::new(0);
        if let Ok(style) = ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} units (ETA {eta}) {wide_msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        Bar { bar }
    }
}

impl Observer for Bar {
    fn on_event(&self, event: &Event<'_>) {
        match event {
            Event::RunStarted { total, done } => {
                self.bar.set_length(*total as u64);
                self.bar.set_position(*done as u64);
                self.bar.reset_eta();
            }
            Event::GroupStarted { group, .. } => self.bar.set_message(group_label(group)),
            Event::UnitFinished { .. } => self.bar.inc(1),
            Event::GroupFinished { .. } => {}
            Event::Message(m) => self.bar.println(*m),
            Event::RunFinished { seconds } => {
                self.bar
                    .finish_with_message(format!("finished in {}", format_secs(*seconds)));
            }
        }
    }
}

/// A progress bar when standard error is a terminal, log lines otherwise.
pub fn for_terminal() -> Box<dyn Observer> {
    if std::io::stderr().is_terminal() {
        Box::new(Bar::default())
    } else {
        Box::new(LogLines::default())
    }
}
