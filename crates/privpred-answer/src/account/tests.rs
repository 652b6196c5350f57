use super::*;

fn a(label: u32) -> Answer {
    Answer {
        label,
        scores: None,
    }
}

fn rows(from: usize, n: usize) -> Vec<Vec<f32>> {
    (from..from + n).map(|i| vec![i as f32, 1.0]).collect()
}

fn fresh(n: usize) -> Vec<Answer> {
    (0..n).map(|i| a(i as u32)).collect()
}

fn answered(o: &SpendOutcome) -> bool {
    matches!(o, SpendOutcome::Answered { .. })
}

fn account(dir: &Path, total: u64) -> Account {
    Account::of_model_file(&dir.join("m.safetensors"), Some("lid-1"), total, None).unwrap()
}

#[test]
fn the_default_ledger_and_mark_sit_beside_the_model_file() {
    let m = Path::new("/x/m.safetensors");
    assert_eq!(
        default_ledger(m),
        LedgerSpec::Sqlite("/x/m.safetensors.ledger.sqlite".into())
    );
    assert_eq!(
        default_spend_mark(m).path(),
        Path::new("/x/m.safetensors.ledger-mark.json")
    );
    assert_eq!(ledger_spec(None, m).unwrap(), default_ledger(m));
    assert_eq!(
        ledger_spec(Some("sqlite:/y.db"), m).unwrap(),
        LedgerSpec::Sqlite("/y.db".into())
    );
    assert!(ledger_spec(Some("mysql://h"), m).unwrap_err().is_config());
    let acc = Account::of_model_file(m, Some("id"), 5, None).unwrap();
    assert_eq!(acc.mark, Some(default_spend_mark(m)));
}

#[test]
fn a_budget_without_a_ledger_id_is_refused() {
    for id in [None, Some("")] {
        let e = BudgetIdentity::of(Path::new("m"), id, 5).unwrap_err();
        assert!(
            e.is_config() && e.to_string().contains("no ledger id"),
            "{e}"
        );
    }
    let i = BudgetIdentity::of(Path::new("m"), Some("abc"), 5).unwrap();
    assert_eq!(i.keys(&rows(0, 2)).len(), 2);
    // keyed by the ledger id and the row only: the same for every front end
    assert_eq!(
        i.keys(&rows(0, 1))[0],
        answer_key("abc", None, &rows(0, 1)[0])
    );
}

#[test]
fn one_shot_and_long_lived_users_spend_one_record_at_most_b() {
    let dir = tempfile::tempdir().unwrap();
    let acc = account(dir.path(), 5);
    // missing ledger without init: refused, nothing created
    assert!(acc.spend_once(&rows(0, 1), fresh(1), false).is_err());
    assert!(answered(
        &acc.spend_once(&rows(0, 2), fresh(2), true).unwrap()
    ));
    {
        let s = acc.session(false).unwrap();
        assert_eq!(s.state().unwrap().spent, 2);
        // a repeated row is free, two new ones spend two
        assert!(answered(&s.spend(&rows(1, 3), fresh(3)).unwrap()));
        assert_eq!(s.state().unwrap().spent, 4);
    }
    assert!(matches!(
        acc.spend_once(&rows(10, 2), fresh(2), false).unwrap(),
        SpendOutcome::Exhausted { needed: 2, .. }
    ));
    assert!(answered(
        &acc.spend_once(&rows(10, 1), fresh(1), false).unwrap()
    ));
    let s = acc.session(false).unwrap();
    assert!(!answered(&s.spend(&rows(20, 1), fresh(1)).unwrap()));
    assert_eq!(s.state().unwrap(), BudgetState { total: 5, spent: 5 });
    let mark = acc.mark.as_ref().unwrap();
    assert_eq!(
        mark.read("lid-1").unwrap(),
        5,
        "every spend raised the mark"
    );
}

#[test]
fn a_ledger_below_the_mark_is_refused_by_every_user() {
    let dir = tempfile::tempdir().unwrap();
    let acc = account(dir.path(), 5);
    assert!(answered(
        &acc.spend_once(&rows(0, 3), fresh(3), true).unwrap()
    ));
    // a second, fresh ledger for the same model (`--init-ledger` on another file)
    let other = Account {
        ledger: LedgerSpec::Sqlite(dir.path().join("other.sqlite")),
        ..acc.clone()
    };
    let e = other.spend_once(&rows(5, 1), fresh(1), true).unwrap_err();
    assert!(
        e.is_config() && e.to_string().contains("3 were already released"),
        "{e}"
    );
    // whatever record that attempt left, no user can spend it
    for init in [false, true] {
        assert!(other.session(init).is_err());
        assert!(other.spend_once(&rows(5, 1), fresh(1), init).is_err());
    }
    // the ledger replaced by an older copy (here: re-created empty)
    for f in [
        "m.safetensors.ledger.sqlite",
        "m.safetensors.ledger.sqlite-wal",
    ] {
        let _ = std::fs::remove_file(dir.path().join(f));
    }
    assert!(acc.session(true).is_err());
    assert!(acc.spend_once(&rows(5, 1), fresh(1), false).is_err());
}

#[test]
fn a_seeded_model_answers_only_when_opted_in() {
    let e = seed_gate(Some(11), false).unwrap_err();
    assert!(e.is_config() && e.to_string().contains("seed 11"), "{e}");
    assert_eq!(seed_gate(Some(11), true).unwrap(), Some(11));
    assert_eq!(seed_gate(None, false).unwrap(), None);
}
