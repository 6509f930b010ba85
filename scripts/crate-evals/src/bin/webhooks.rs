//! Mast's Standard Webhooks signature against the `standardwebhooks` crate's: the same bytes
//! for the same inputs, and what each costs.
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use rand::{Rng, RngCore};
use sha2::Sha256;
use std::time::Instant;

/// crates/engine/src/standard_webhooks.rs's `SigningSecret::sign`, verbatim.
fn ours(key: &[u8], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

fn main() {
    let mut rng = rand::rng();
    // Same bytes: random keys (16..=64 bytes, Mast's bounds), ids, timestamps, JSON-ish bodies.
    let n = 100_000;
    for _ in 0..n {
        let mut key = vec![0u8; rng.random_range(16..=64)];
        rng.fill_bytes(&mut key);
        let id = format!("msg_{}", rng.random::<u64>());
        let ts: i64 = rng.random_range(0..4_000_000_000);
        let len = rng.random_range(0..4096);
        let body: String = (0..len).map(|_| rng.random_range(' '..='~')).collect();
        let text = format!("whsec_{}", STANDARD.encode(&key));
        let theirs = standardwebhooks::Webhook::new(&text)
            .unwrap()
            .sign(&id, ts, body.as_bytes())
            .unwrap();
        assert_eq!(ours(&key, &id, ts, body.as_bytes()), theirs);
    }
    println!("{n} random inputs: identical signatures");
    // Bytes that are not UTF-8: Mast signs them, the crate refuses.
    let key = [7u8; 32];
    let bad = b"{\"a\":\"\xff\"}";
    println!(
        "non-UTF-8 body: ours {:?}, crate {:?}",
        ours(&key, "m", 1, bad),
        standardwebhooks::Webhook::from_bytes(key.to_vec())
            .unwrap()
            .sign("m", 1, bad)
            .map_err(|e| e.to_string())
    );
    // Cost per signature.
    for size in [1024usize, 16 * 1024, 256 * 1024] {
        let body = "x".repeat(size);
        let wh = standardwebhooks::Webhook::from_bytes(key.to_vec()).unwrap();
        let iters = (50_000_000 / (size + 200)).max(200);
        for round in 0..3 {
            let t = Instant::now();
            for i in 0..iters {
                std::hint::black_box(ours(&key, "msg_1", i as i64, body.as_bytes()));
            }
            let a = t.elapsed().as_nanos() as f64 / iters as f64;
            let t = Instant::now();
            for i in 0..iters {
                std::hint::black_box(wh.sign("msg_1", i as i64, body.as_bytes()).unwrap());
            }
            let b = t.elapsed().as_nanos() as f64 / iters as f64;
            println!(
                "body {size:>7} B, round {round}: ours {:>9.0} ns, crate {:>9.0} ns per signature",
                a, b
            );
        }
    }
}
