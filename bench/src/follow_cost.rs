//! `follow-cost`: what the dispatcher's follow-up of its handouts costs per hand-over, natively,
//! with N leases already followed (a busy queue follows every lease of the last `LEASE_ACK_SEC`:
//! at a thousand hand-overs a second, 30,000). One hand-over's bookkeeping is what the dispatcher
//! does between the offer and its next alarm: `Offers::offer`, `Offers::taken` (the lease won) and
//! `Offers::follow_up_at` twice (the alarm kept at the next follow-up, after the push and after the
//! pass). The core's own code, no runtime: the figure is how it grows with N, not the Worker's
//! time (wasm runs it a few times slower).

use crate::emit;
use sema_core::dispatch::{Offers, Ready};
use serde_json::json;
use std::time::Instant;

pub fn follow_cost(followed: &[usize], hand_overs: usize) {
    for &n in followed {
        let ids: Vec<String> = (0..n + hand_overs)
            .map(|i| format!("run_0190f3a2-7c1e-7d55-9a4b-{i:012}"))
            .collect();
        let mut offers = Offers::default();
        let hand_over = |offers: &mut Offers, i: usize| {
            let ready = Ready {
                since: i as i64,
                task_id: ids[i].clone(),
            };
            offers.offer(ready, i as i64);
            // An ack window longer than the run, so none falls due and N stays followed.
            offers.taken(
                &ids[i],
                Some(("runner-1".into(), 1)),
                i as i64,
                i64::MAX / 4,
            );
            std::hint::black_box(offers.follow_up_at());
            std::hint::black_box(offers.follow_up_at());
        };
        for i in 0..n {
            hand_over(&mut offers, i);
        }
        // What is followed (the dispatcher follows at most `MAX_FOLLOWED`).
        let held = offers.len();
        let started = Instant::now();
        for i in n..n + hand_overs {
            hand_over(&mut offers, i);
        }
        let us = started.elapsed().as_secs_f64() * 1e6 / hand_overs as f64;
        emit(json!({
            "scenario": "follow-cost",
            "followed": held,
            "hand_overs": hand_overs,
            "us_per_hand_over": us,
        }));
    }
}
