//! The bank's parts on their own: the state machine (transfers, refusals, duplicates
//! counted, snapshots), a client's model against the bank, the timeline's gaps; and the
//! scenario, short, in both places — its checks and premises, never its speed.

use super::clients::Client;
use super::machine::{Bank, CLIENTS, OPENING_BALANCE, Reply, Transfer};
use super::timeline::{Gap, Timeline};
use super::{BankConfig, Place, measure};
use std::time::Duration;
use velos::embed::{CommitInfo, Error, Position, StateMachine};

const POSITION: Position = Position { slot: 0, index: 0 };

fn transfer(seq: u64, from: u32, to: u32, amount: u64) -> Transfer {
    Transfer {
        client: 1,
        seq,
        from,
        to,
        amount,
    }
}

#[test]
fn transfers_move_money_refuse_overdrafts_and_count_duplicates() {
    let mut bank = Bank::new(1024);
    let total = bank.total();
    let t = transfer(1, 1, 5, 300);
    let got = bank.apply(POSITION, &t.encode());
    let want = Reply::Moved {
        from: OPENING_BALANCE - 300,
        to: OPENING_BALANCE + 300,
        applied: 1,
    };
    assert_eq!(got, want);
    let over = transfer(2, 1, 5, OPENING_BALANCE);
    let refused = Reply::Refused {
        from: OPENING_BALANCE - 300,
        applied: 2,
    };
    assert_eq!(bank.apply(POSITION, &over.encode()), refused);
    assert_eq!(bank.total(), total, "money is conserved");
    assert_eq!(bank.duplicates, 0);
    bank.apply(POSITION, &over.encode());
    assert_eq!(bank.duplicates, 1, "a sequence number seen before");
    bank.apply(POSITION, &transfer(9, 1, 5, 1).encode());
    assert_eq!(bank.skipped, 1, "a sequence number skipped");
    assert_eq!(bank.apply(POSITION, b"junk"), Reply::Invalid);
    let out_of_range = transfer(10, 1, bank.accounts(), 1);
    assert_eq!(bank.apply(POSITION, &out_of_range.encode()), Reply::Invalid);
    assert_eq!(bank.total(), total);
}

#[test]
fn a_snapshot_restores_the_same_bank_and_a_wrong_size_is_refused() {
    let mut bank = Bank::new(4096);
    for seq in 1..50 {
        bank.apply(POSITION, &transfer(seq, seq as u32, 0, seq).encode());
    }
    bank.apply(POSITION, &transfer(3, 1, 2, 1).encode());
    let snapshot = bank.snapshot();
    assert_eq!(snapshot.len(), 4096 + 80, "the table and its header");
    let mut copy = Bank::new(4096);
    copy.restore(&snapshot).expect("restores");
    assert_eq!(copy, bank);
    let mut other = Bank::new(2048);
    assert!(other.restore(&snapshot).is_err(), "another size");
    assert_eq!(other, Bank::new(2048), "left as it was");
}

fn committed(response: Reply) -> Result<CommitInfo<Reply>, Error> {
    Ok(CommitInfo {
        position: POSITION,
        batch_commands: 1,
        leader: 0,
        latency: Duration::ZERO,
        response,
    })
}

#[test]
fn a_clients_model_answers_as_the_bank_does_and_catches_what_differs() {
    let mut bank = Bank::new(8 * 256);
    let mut clients: Vec<Client> = (0..CLIENTS as u8)
        .map(|c| Client::new(c, bank.accounts(), 7))
        .collect();
    for round in 0..500 {
        let c = &mut clients[round % CLIENTS];
        let command = c.next_command();
        let reply = bank.apply(POSITION, &command);
        c.settle_for_test(committed(reply));
    }
    for c in &clients {
        assert!(c.log.wrong.is_empty(), "{:?}", c.log.wrong);
        assert!(
            c.check_final(&bank).is_empty(),
            "{:?}",
            c.check_final(&bank)
        );
    }
    // An answer the model does not give, and a command the bank applied twice.
    let c = &mut clients[0];
    let command = c.next_command();
    bank.apply(POSITION, &command);
    let twice = bank.apply(POSITION, &command);
    c.settle_for_test(committed(twice));
    assert_eq!(
        c.log.wrong.len(),
        1,
        "the second application's count is off"
    );
    assert!(!c.check_final(&bank).is_empty(), "the final state shows it");
    assert_eq!(bank.duplicates, 1);
    // A lost response: applied, not checked, the model still moves on.
    let command = clients[1].next_command();
    bank.apply(POSITION, &command);
    clients[1].settle_for_test(Err(Error::ResponseLost { slot: 3 }));
    assert_eq!(clients[1].log.responses_lost, 1);
    assert!(clients[1].check_final(&bank).is_empty());
}

#[test]
fn the_longest_gap_around_a_window_and_the_rates() {
    let t = Timeline::new(vec![30, 10, 40, 100, 105, 0], 150);
    assert_eq!(t.len(), 6);
    assert_eq!(
        t.longest_gap(35, 45),
        Some(Gap { from: 40, len: 60 }),
        "straddles the end"
    );
    assert_eq!(
        t.longest_gap(12, 12),
        Some(Gap { from: 10, len: 20 }),
        "around the window"
    );
    assert_eq!(t.longest_gap(0, 35).map(|g| g.len), Some(20));
    assert_eq!(
        t.longest_gap(110, 140),
        Some(Gap { from: 105, len: 45 }),
        "the run's end"
    );
    assert_eq!(t.count(10, 100), 3);
    assert!((t.rate(0, 1_000_000_000) - 6.0).abs() < 1e-9);
    assert_eq!(t.last_until(39), Some(30));
    assert_eq!(t.last_until(0), Some(0));
    assert_eq!(Timeline::new(vec![5], 9).last_until(4), None);
    let long: Vec<u64> = t.gaps_over(0, 150, 15).iter().map(|g| g.from).collect();
    assert_eq!(long, [10, 40, 105]);
}

/// The scenario, short, in both places: every check passes and the premises hold (the
/// replacement voted, commands were committed after the `replace` call). Nothing here
/// asserts speed, only that the replacement votes within the run's 10 s bound.
#[test]
fn both_places_replaced_while_clients_write_pass_every_check() {
    for place in [Place::Leader, Place::Follower] {
        let config = BankConfig {
            place,
            runs: 1,
            before_crash: Duration::from_millis(400),
            settle: Duration::from_millis(100),
            after: Duration::from_millis(200),
            ..BankConfig::default()
        };
        let report = measure(&config, |_| {}).expect("runs");
        let run = &report.runs[0];
        assert!(run.ok, "{place:?}: {:?}", run.failures);
        assert!(
            run.vote_ms.is_some_and(|v| v < 10_000.0),
            "{place:?}: voted"
        );
        assert!(run.commits_during > 0, "{place:?}: commits after the call");
        assert_eq!((run.duplicates, run.wrong), (0, 0), "{place:?}");
        assert_eq!(report.duplicates + report.wrong, 0);
        assert!(
            run.failover_gap_ms.is_some(),
            "{place:?}: the failover seen"
        );
        if place == Place::Leader {
            assert_ne!(run.acting_leader, run.replaced, "another replica led");
        }
    }
}
