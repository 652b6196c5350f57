//! Property tests: the IDX, CSV, CIFAR-batch and ZIP parsers never panic on arbitrary bytes;
//! every preprocessing path (PCA and bias included) keeps max ‖x‖ ≤ 1 computed in f64.

use privpred_data::csvfile::{CsvOptions, parse_csv};
use privpred_data::preprocess::{Preprocessing, UnitBall};
use privpred_data::{Dataset, Provenance};
use proptest::prelude::*;
use std::path::Path;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    #[test]
    fn idx_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), rank in 1usize..4) {
        let _ = privpred_data::idx::read_idx(&bytes[..], Path::new("fuzz"), rank, |b| b as f32);
    }

    #[test]
    fn idx_parser_never_panics_on_valid_headers(n in 0u32..5, r in 0u32..5, c in 0u32..5, extra in proptest::collection::vec(any::<u8>(), 0..120)) {
        let mut bytes = vec![0u8, 0, 8, 3];
        for d in [n, r, c] { bytes.extend_from_slice(&d.to_be_bytes()); }
        bytes.extend_from_slice(&extra);
        let res = privpred_data::idx::read_idx(&bytes[..], Path::new("fuzz"), 3, |b| b);
        let total = (n * r * c) as usize;
        prop_assert_eq!(res.is_ok(), extra.len() == total);
        if let Ok(a) = res { prop_assert_eq!(a.data, extra); }
    }

    #[test]
    fn csv_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = parse_csv(&bytes[..], Path::new("fuzz.csv"), &CsvOptions::default());
    }

    #[test]
    fn csv_parser_never_panics_on_csvish_text(s in "[0-9a-z.,;\\-+eE \n\"]{0,200}") {
        if let Ok(t) = parse_csv(s.as_bytes(), Path::new("fuzz.csv"), &CsvOptions::default()) {
            prop_assert_eq!(t.features.len(), t.labels.len() * t.d);
            prop_assert!(t.features.iter().all(|v| v.is_finite()));
        }
    }

    #[test]
    fn cifar_and_zip_parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let (mut f, mut l) = (Vec::new(), Vec::new());
        let _ = privpred_data::cifar::parse_batch(&bytes, Path::new("fuzz.bin"), &mut f, &mut l);
        let _ = privpred_data::zip::parse_member(&bytes, "a");
    }
}

fn dataset(rows: &[Vec<f32>], classes: usize) -> Dataset {
    let d = rows[0].len();
    let labels: Vec<u32> = (0..rows.len()).map(|i| (i % classes) as u32).collect();
    Dataset::new(
        d,
        classes,
        rows.concat(),
        labels,
        Provenance {
            name: "prop".into(),
            ..Default::default()
        },
    )
    .unwrap()
}

/// Bias values: none, the edges of [0, 1), √½ (the value of recipes without one), the small values
/// the hold-out measurements tried, and any
/// value in between.
fn bias_value() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(0.05),
        Just(0.1),
        Just(0.2),
        Just(std::f64::consts::FRAC_1_SQRT_2),
        Just(0.999_999_999),
        Just(1e-6),
        0.0f64..1.0,
    ]
}

fn rule() -> impl Strategy<Value = UnitBall> {
    prop_oneof![
        Just(UnitBall::Normalize),
        Just(UnitBall::MaxNorm),
        (1e-3f64..1e3).prop_map(|radius| UnitBall::Clip { radius }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    #[test]
    fn every_preprocessing_path_stays_in_the_unit_ball(
        d in 1usize..12,
        n in 6usize..40,
        mag in prop_oneof![Just(1e-3f32), Just(1.0f32), Just(255.0f32), Just(1e6f32)],
        seed in any::<u64>(),
        scale in prop_oneof![Just(1.0 / 255.0), Just(1.0), Just(37.5)],
        pca_frac in 0.0f64..1.0,
        use_pca in any::<bool>(),
        bias in bias_value(),
        unit_ball in rule(),
        queries in proptest::collection::vec(proptest::collection::vec(-1e7f32..1e7, 12), 1..4),
    ) {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let rows: Vec<Vec<f32>> = (0..n).map(|_| (0..d).map(|_| rng.random_range(-1.0f32..1.0) * mag).collect()).collect();
        let ds = dataset(&rows, 3);
        let pca = use_pca.then(|| 1 + ((d - 1) as f64 * pca_frac) as usize);
        let p = Preprocessing { scale, classes: None, subsample: Some(n - 2), pca, unit_ball, ..Default::default() }.with_bias(bias);
        let f = p.fit(&ds, seed).unwrap();
        let tr = f.apply_train(&ds).unwrap();
        prop_assert!(tr.max_norm() <= 1.0, "train max norm {}", tr.max_norm());
        let te = f.apply(&ds).unwrap();
        prop_assert!(te.max_norm() <= 1.0);
        for q in &queries {
            let x = f.apply_row(&q[..d]).unwrap();
            let norm = x.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt();
            prop_assert!(norm <= 1.0, "query norm {norm}");
            prop_assert_eq!(x.len(), f.output_dim());
            // the bias column exists exactly for v > 0 and holds the largest f32 ≤ v
            prop_assert_eq!(f.output_dim(), pca.unwrap_or(d) + usize::from(bias > 0.0));
            if bias > 0.0 {
                let b = x[x.len() - 1] as f64;
                // one f32 ulp below v at most: a relative gap below 2^-23 (f32::EPSILON)
                prop_assert!(b <= bias && b > bias * (1.0 - f64::from(f32::EPSILON)), "bias {b} for v = {bias}");
            }
        }
    }
}

#[test]
fn normalize_rule_gives_near_unit_norm_and_bias_is_constant() {
    let rows = vec![
        vec![3.0f32, 4.0],
        vec![0.0, 10.0],
        vec![1.0, 1.0],
        vec![2.0, 0.5],
    ];
    let ds = dataset(&rows, 2);
    let f = Preprocessing {
        scale: 1.0,
        bias: true,
        ..Default::default()
    }
    .fit(&ds, 0)
    .unwrap();
    let t = f.apply(&ds).unwrap();
    for i in 0..t.n {
        let r = t.row(i);
        let n2: f64 = r.iter().map(|&v| (v as f64).powi(2)).sum();
        assert!(n2 <= 1.0 && n2 > 1.0 - 1e-4, "{n2}");
        assert_eq!(r[2], std::f32::consts::FRAC_1_SQRT_2);
    }
    assert!((t.row(0)[0] as f64 - 0.6 * 0.5f64.sqrt()).abs() < 1e-5);
    assert_eq!(f.steps().len(), 3);
}

/// `--bias v`: v = 0 adds no column (even with `bias: true`), v = 0.1 gives
/// [x·√(1 − 0.01), 0.1] with the row's norm just inside 1.
#[test]
fn bias_value_sets_the_column_and_the_feature_scale() {
    let rows = vec![vec![3.0f32, 4.0], vec![0.0, 10.0]];
    let ds = dataset(&rows, 2);
    let base = Preprocessing {
        scale: 1.0,
        ..Default::default()
    };
    for f in [
        base.clone().with_bias(0.0),
        Preprocessing {
            bias: true,
            bias_value: 0.0,
            ..base.clone()
        },
    ] {
        let f = f.fit(&ds, 0).unwrap();
        assert_eq!(f.output_dim(), 2);
        assert_eq!(f.apply(&ds).unwrap().d, 2);
        assert!(
            !f.steps().iter().any(|s| s.starts_with("bias")),
            "{:?}",
            f.steps()
        );
    }
    let f = base.with_bias(0.1).fit(&ds, 0).unwrap();
    assert_eq!(f.recipe.bias(), 0.1);
    let t = f.apply(&ds).unwrap();
    assert_eq!(t.d, 3);
    let room = (1.0f64 - 0.01).sqrt();
    for i in 0..t.n {
        let r = t.row(i);
        // the largest f32 ≤ 0.1 (f32(0.1) rounds up)
        assert_eq!(r[2], 0.1f32.next_down());
        let n2: f64 = r.iter().map(|&v| (v as f64).powi(2)).sum();
        assert!(n2 <= 1.0 && n2 > 1.0 - 1e-4, "{n2}");
    }
    assert!((t.row(0)[0] as f64 - 0.6 * room).abs() < 1e-5);
    assert!(
        f.steps().last().unwrap().starts_with("bias:0.1 "),
        "{:?}",
        f.steps()
    );
}

/// Bias values outside [0, 1) are refused by the parser, by `fit` and by `validate` (a
/// crafted artifact), naming the valid range.
#[test]
fn bad_bias_values_are_refused_with_the_range() {
    use privpred_data::preprocess::{check_bias, parse_bias};
    for s in ["1", "1.5", "-0.1", "nan", "inf", "x", ""] {
        let e = parse_bias(s).unwrap_err().to_string();
        assert!(e.contains("[0, 1)"), "{s}: {e}");
    }
    for v in [0.0, 0.05, 0.5, 0.999] {
        assert_eq!(parse_bias(&v.to_string()).unwrap(), v);
    }
    assert!(check_bias(-0.0).is_ok());
    let ds = dataset(&[vec![3.0f32, 4.0], vec![1.0, 0.0]], 2);
    for v in [1.0, -0.5, f64::NAN] {
        let p = Preprocessing::default().with_bias(v);
        assert!(
            p.fit(&ds, 0).unwrap_err().to_string().contains("[0, 1)"),
            "{v}"
        );
        let mut f = Preprocessing::default().with_bias(0.1).fit(&ds, 0).unwrap();
        f.recipe.bias_value = v;
        assert!(f.validate().is_err(), "{v}");
    }
}

#[test]
fn clip_rule_keeps_small_rows_and_clips_large_ones() {
    let rows = vec![vec![0.3f32, 0.4], vec![30.0, 40.0]];
    let ds = dataset(&rows, 2);
    let f = Preprocessing {
        scale: 1.0,
        unit_ball: UnitBall::Clip { radius: 1.0 },
        ..Default::default()
    }
    .fit(&ds, 0)
    .unwrap();
    let t = f.apply(&ds).unwrap();
    assert!((t.row(0)[0] - 0.3).abs() < 1e-5 && (t.row(0)[1] - 0.4).abs() < 1e-5);
    assert!((t.row(1)[0] - 0.6).abs() < 1e-5 && (t.row(1)[1] - 0.8).abs() < 1e-5);
    assert!(f.data_dependent().is_empty());
    let m = Preprocessing {
        scale: 1.0,
        unit_ball: UnitBall::MaxNorm,
        pca: Some(1),
        ..Default::default()
    }
    .fit(&ds, 0)
    .unwrap();
    assert_eq!(m.data_dependent().len(), 2);
}

#[test]
fn fitted_preprocessing_round_trips_through_json() {
    let rows: Vec<Vec<f32>> = (0..20)
        .map(|i| vec![i as f32, (i * i % 7) as f32, 1.0])
        .collect();
    let ds = dataset(&rows, 2);
    let f = Preprocessing {
        pca: Some(2),
        bias: true,
        subsample: Some(10),
        ..Default::default()
    }
    .fit(&ds, 5)
    .unwrap();
    let j = serde_json::to_string(&f).unwrap();
    let g: privpred_data::FittedPreprocessing = serde_json::from_str(&j).unwrap();
    assert_eq!(f, g);
    assert_eq!(f.apply_train(&ds).unwrap(), g.apply_train(&ds).unwrap());
    let p: Preprocessing =
        serde_json::from_str(&serde_json::to_string(&Preprocessing::default()).unwrap()).unwrap();
    assert_eq!(p, Preprocessing::default());
}

#[test]
fn holdout_is_deterministic_and_disjoint() {
    let rows: Vec<Vec<f32>> = (0..100).map(|i| vec![i as f32]).collect();
    let ds = dataset(&rows, 2);
    let (a, b) = privpred_data::split::holdout(&ds, 0.1, 42);
    let (a2, b2) = privpred_data::split::holdout(&ds, 0.1, 42);
    assert_eq!((a.n, b.n), (90, 10));
    assert_eq!((&a, &b), (&a2, &b2));
    let mut all: Vec<i64> = a
        .features
        .iter()
        .chain(&b.features)
        .map(|&v| v as i64)
        .collect();
    all.sort();
    assert_eq!(all, (0..100).collect::<Vec<_>>());
    let (_, b3) = privpred_data::split::holdout(&ds, 0.1, 43);
    assert_ne!(b.features, b3.features);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    /// The owned, in-place paths (`apply_train_owned`, `apply_owned`) give bit-identical
    /// results to the borrowed ones for every combination of steps. Sizes cross the
    /// 256-row projection block so multi-block PCA is covered.
    #[test]
    fn owned_preprocessing_is_bit_identical_to_borrowed(
        d in 1usize..10,
        n in 4usize..600,
        classes in 2usize..5,
        mag in prop_oneof![Just(1e-3f32), Just(1.0f32), Just(255.0f32)],
        seed in any::<u64>(),
        scale in prop_oneof![Just(1.0 / 255.0), Just(1.0), Just(37.5)],
        use_classes in any::<bool>(),
        sub_frac in proptest::option::of(0.05f64..1.0),
        pca_frac in proptest::option::of(0.0f64..1.0),
        bias in bias_value(),
        unit_ball in rule(),
    ) {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let rows: Vec<Vec<f32>> = (0..n).map(|_| (0..d).map(|_| rng.random_range(-1.0f32..1.0) * mag).collect()).collect();
        let ds = dataset(&rows, classes);
        let keep = if use_classes { Some(2) } else { None };
        let available = match keep {
            Some(c) => ds.labels.iter().filter(|&&y| (y as usize) < c).count(),
            None => n,
        };
        let subsample = sub_frac.map(|f| ((available as f64 * f) as usize).max(1));
        let pca = pca_frac.map(|f| 1 + ((d - 1) as f64 * f) as usize);
        let p = Preprocessing { scale, classes: keep, subsample, pca, unit_ball, ..Default::default() }.with_bias(bias);
        let f = p.fit(&ds, seed).unwrap();
        let borrowed = f.apply_train(&ds).unwrap();
        let owned = f.apply_train_owned(ds.clone()).unwrap();
        prop_assert_eq!(owned.features.len(), borrowed.features.len());
        prop_assert!(owned.features.iter().zip(&borrowed.features).all(|(a, b)| a.to_bits() == b.to_bits()));
        prop_assert_eq!(&owned, &borrowed);
        prop_assert!(owned.max_norm() <= 1.0);
        let te_b = f.apply(&ds).unwrap();
        let te_o = f.apply_owned(ds.clone()).unwrap();
        prop_assert!(te_o.features.iter().zip(&te_b.features).all(|(a, b)| a.to_bits() == b.to_bits()));
        prop_assert_eq!(&te_o, &te_b);
        // One raw row through `apply_row` matches its row of the split: bit for bit without
        // PCA; with PCA up to the GEMM's summation order (a 1-row product vs a block).
        let q = f.apply_row(ds.row(0)).unwrap();
        if keep.is_none_or(|c| (ds.labels[0] as usize) < c) {
            if pca.is_none() {
                prop_assert!(q.iter().zip(te_b.row(0)).all(|(a, b)| a.to_bits() == b.to_bits()));
            } else {
                prop_assert!(q.iter().zip(te_b.row(0)).all(|(a, b)| (a - b).abs() <= 1e-5));
            }
        }
    }

    /// `into_subset` (in place) equals `subset` (copy) for any distinct indices in any
    /// order, and refuses repeated or out-of-range ones.
    #[test]
    fn in_place_subset_equals_copying_subset(
        n in 1usize..300,
        d in 1usize..6,
        seed in any::<u64>(),
        frac in 0.0f64..1.0,
        sorted in any::<bool>(),
    ) {
        let rows: Vec<Vec<f32>> = (0..n).map(|i| (0..d).map(|j| (i * d + j) as f32).collect()).collect();
        let ds = dataset(&rows, 3);
        let m = (n as f64 * frac) as usize;
        let mut idx = privpred_data::split::permutation(n, seed)[..m].to_vec();
        if sorted { idx.sort_unstable(); }
        let copy = ds.subset(&idx);
        let moved = ds.clone().into_subset(&idx).unwrap();
        prop_assert_eq!(&moved, &copy);
        prop_assert_eq!(moved.features.capacity(), moved.features.len());
        if m >= 1 {
            let mut dup = idx.clone();
            dup.push(idx[0]);
            prop_assert!(ds.clone().into_subset(&dup).is_err());
        }
        prop_assert!(ds.clone().into_subset(&[n]).is_err());
    }
}

#[test]
fn owned_paths_check_their_input_like_the_borrowed_ones() {
    let rows: Vec<Vec<f32>> = (0..10).map(|i| vec![i as f32, 1.0]).collect();
    let ds = dataset(&rows, 2);
    let f = Preprocessing {
        subsample: Some(5),
        ..Default::default()
    }
    .fit(&ds, 1)
    .unwrap();
    let small = ds.subset(&[0, 1, 2]);
    let e1 = f.apply_train(&small).unwrap_err().to_string();
    let e2 = f.apply_train_owned(small.clone()).unwrap_err().to_string();
    assert_eq!(e1, e2);
    let wide = dataset(&[vec![1.0, 2.0, 3.0], vec![0.0, 1.0, 1.0]], 2);
    let e1 = f.apply(&wide).unwrap_err().to_string();
    let e2 = f.apply_owned(wide).unwrap_err().to_string();
    assert_eq!(e1, e2);
    assert!(e1.contains("dimension"), "{e1}");
}
