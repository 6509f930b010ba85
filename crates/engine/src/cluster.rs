//! Several replicas on one Postgres. What a replica publishes (appended events, interrupts,
//! queued work, deletions) reaches the others as signals over LISTEN/NOTIFY — only while it
//! hears from others: every replica says hello every few seconds, so one alone on its
//! database costs the database nothing per event. A replica acts
//! on them only where it has something local to act on — subscribers of that session, its
//! runner, polls waiting on that environment. Signals are hints: streams re-read the store,
//! and a periodic check (and one after every reconnect) compares the watched sessions' logs
//! with what their subscribers have, so a lost signal delays an event, never loses it.
//! The store itself signals changed API keys and hooks (whoever changed them): every replica
//! drops its cached key lookups or hook lists on hearing it, and caches none while its
//! listener is disconnected.

use tokio::sync::mpsc;

use super::Engine;
use crate::hub::Signal;
use mast_store::notify::{self, Heard};

/// Signals waiting to be sent before new ones are dropped.
const OUTBOX: usize = 4096;

impl Engine {
    /// Joins the replicas sharing the Postgres database at `url`.
    pub fn join_replicas(&self, url: &str) {
        let inner = &self.inner;
        let (out_tx, out_rx) = mpsc::channel(OUTBOX);
        inner.hub.connect_outbox(&inner.owner, out_tx);
        let stop = inner.shutdown.clone();
        inner
            .tasks
            .spawn(notify::send_forever(url.to_string(), out_rx, stop.clone()));
        let (in_tx, mut in_rx) = mpsc::channel(OUTBOX);
        inner
            .tasks
            .spawn(notify::listen_forever(url.to_string(), in_tx, stop.clone()));
        let engine = self.clone();
        inner.tasks.spawn(async move {
            let mut tick = tokio::time::interval(engine.inner.config.resync_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tick.tick() => {
                        engine.inner.hub.tell(Signal::Hello { greeting: false });
                        engine.resync().await;
                    }
                    heard = in_rx.recv() => match heard {
                        None => return,
                        Some(Heard::Connected) => {
                            // A key revoked while the listener was away went unheard.
                            engine.inner.hub.keys_heard(true);
                            engine.inner.hub.tell(Signal::Hello { greeting: true });
                            engine.resync().await;
                        }
                        Some(Heard::Lost) => engine.inner.hub.keys_heard(false),
                        Some(Heard::Payload(p)) => engine.heard(&p),
                    },
                }
            }
        });
    }

    /// Acts on another replica's signal.
    fn heard(&self, payload: &str) {
        let Some((origin, signal)) = Signal::decode(payload) else {
            tracing::debug!(payload, "ignoring an unreadable replica signal");
            return;
        };
        if signal == Signal::KeysChanged {
            // Sent by the store for any writer of keys (the CLI is no replica), so it is
            // neither this replica's own echo nor a peer's hello.
            self.inner.hub.keys_changed();
            return;
        }
        if signal == Signal::HooksChanged {
            // Sent by the store too; this replica's own changes already dropped its cache.
            self.inner.hub.hooks_changed();
            return;
        }
        if origin == self.inner.owner {
            return;
        }
        let newcomer = self.inner.hub.heard_peer();
        if newcomer || signal == (Signal::Hello { greeting: true }) {
            // A replica that just appeared (or reconnected) learns of this one at once.
            self.inner.hub.tell(Signal::Hello { greeting: false });
        }
        match signal {
            Signal::Hello { .. } => {}
            Signal::Appended { session_id, seq } => {
                self.inner.hub.poke(&session_id, seq);
                self.nudge_here(&session_id);
            }
            Signal::Interrupt {
                session_id,
                thread_id,
            } => self.interrupt_here(&session_id, thread_id.as_deref()),
            Signal::WorkQueued { environment_id } => self.inner.hub.work.queued(&environment_id),
            Signal::Deleted { session_id } => self.inner.hub.deleted_here(&session_id),
            Signal::KeysChanged | Signal::HooksChanged => {}
        }
    }

    /// Pokes every watched session whose log is ahead of what was published here.
    async fn resync(&self) {
        let watched = self.inner.hub.watched();
        if watched.is_empty() {
            return;
        }
        match self.inner.store.last_seqs(&watched).await {
            Ok(seqs) => {
                for (id, seq) in seqs {
                    self.inner.hub.poke(&id, seq);
                }
            }
            Err(e) => tracing::debug!(error = %e, "could not re-check watched sessions"),
        }
    }

    /// Has this replica's runner of the session (if any) look at its log again.
    fn nudge_here(&self, session_id: &str) {
        let runners = self.inner.runners.lock().expect("runners lock");
        if let Some(h) = runners.get(session_id) {
            h.signal_input();
        }
    }
}
