//! Replays every seed-corpus input and every checked-in regression input (findings of
//! earlier fuzzing runs, fixed since) through its target: none may panic.

use privpred_fuzz::{TARGETS, inputs, read};

#[test]
fn every_corpus_and_regression_input_is_handled_without_a_panic() {
    let mut n = 0;
    for t in TARGETS {
        let corpus = inputs("corpus", t.name);
        assert!(!corpus.is_empty(), "no seed corpus for {}", t.name);
        for p in corpus.iter().chain(inputs("regressions", t.name).iter()) {
            let data = read(p);
            let r = std::panic::catch_unwind(|| (t.run)(&data));
            assert!(r.is_ok(), "{}: {} panicked", t.name, p.display());
            n += 1;
        }
    }
    assert!(n >= TARGETS.len());
}
