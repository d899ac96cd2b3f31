//! The rendezvous between threads on loopback: every node learns every other's
//! information; strangers (another cluster, a node outside the file, a process without the
//! secret, a recorded exchange replayed) are refused with the reason, on both sides, and
//! learn nothing.

use super::*;

const SECRET: &str = "the cluster's secret";

/// A cluster file of `n` nodes on free loopback ports (the joiners' tests use it too).
pub(crate) fn file(n: u16, cluster_id: &str) -> ClusterFile {
    let mut text = format!("cluster_id = \"{cluster_id}\"\nsecret = \"{SECRET}\"\n");
    let ports = crate::loopback::free_ports(n.into()).unwrap();
    for (id, port) in ports.iter().enumerate() {
        text += &format!("[[node]]\nid = {id}\naddress = \"127.0.0.1:{port}\"\n");
    }
    ClusterFile::parse(&text, "test.toml").unwrap()
}

/// `f` with another secret: a process that can reach the nodes but was not told it.
fn stranger(f: &ClusterFile) -> ClusterFile {
    let mut theirs = f.clone();
    theirs.secret = crate::cluster_file::SecretSource::Inline("a guess at the secret".into());
    theirs
}

/// The longest a test waits for a byte from a node: every wait is bounded, so a node that
/// stalls fails its test instead of hanging the run.
const READ_LIMIT: Duration = Duration::from_secs(10);

/// Connects to node `id` of `f`, waiting until it listens (reads bounded by
/// [`READ_LIMIT`]).
fn connect(f: &ClusterFile, id: u16) -> TcpStream {
    let address = f.socket_address(id).unwrap();
    let start = Instant::now();
    loop {
        match TcpStream::connect(address) {
            Ok(st) => {
                st.set_read_timeout(Some(READ_LIMIT)).unwrap();
                return st;
            }
            Err(e) if start.elapsed() > Duration::from_secs(5) => panic!("{e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// The transcript of `hello`'s exchange with node 0 of cluster "c1", node 0 drawing `nonce`.
fn transcript<'a>(hello: &'a Hello, nonce: &'a [u8]) -> Transcript<'a> {
    Transcript {
        cluster_id: "c1",
        dialer: hello.node,
        listener: 0,
        dialer_nonce: &hello.nonce,
        listener_nonce: nonce,
    }
}

/// Answers `hello` on `stream` as a genuine node 0 (it knows the secret) would: its
/// challenge. The nonce it drew.
fn challenge_as_node_0(stream: &mut TcpStream, hello: &Hello) -> Vec<u8> {
    let nonce = proof::nonce().unwrap();
    let proof = transcript(hello, &nonce).prove(SECRET.as_bytes(), Role::ListenerKnows, &[]);
    let challenge = Challenge::Prove {
        magic: MAGIC.into(),
        node: 0,
        nonce: nonce.clone(),
        proof,
    };
    send(stream, &challenge).unwrap();
    nonce
}

/// What a real node 0's exchange returned.
type Exchanged = Result<BTreeMap<u16, Vec<u8>>, RendezvousError>;

/// Runs a real node 0 of `f` and dials it by hand with `hello`, then `proof` whatever its
/// challenge: node 0's result, its challenge and its answer.
fn dial_node_0(f: &ClusterFile, hello: &Hello, proof: &Proof) -> (Exchanged, Challenge, Answer) {
    std::thread::scope(|s| {
        let zero = s.spawn(|| exchange(f, 0, b"keys of 0", Duration::from_millis(1500)));
        let mut stream = connect(f, 0);
        send(&mut stream, hello).unwrap();
        let challenge: Challenge = receive(&mut stream).unwrap();
        send(&mut stream, proof).unwrap();
        let answer: Answer = receive(&mut stream).unwrap();
        (zero.join().unwrap(), challenge, answer)
    })
}

#[test]
fn three_nodes_learn_each_others_information() {
    let f = file(3, "c1");
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3u16)
            .map(|me| {
                let f = &f;
                s.spawn(move || exchange(f, me, &[me as u8; 3], Duration::from_secs(10)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (me, r) in results.into_iter().enumerate() {
        let peers = r.unwrap();
        let ids: Vec<u16> = peers.keys().copied().collect();
        let others: Vec<u16> = (0..3).filter(|&n| n != me as u16).collect();
        assert_eq!(ids, others);
        for (n, info) in peers {
            assert_eq!(info, vec![n as u8; 3]);
        }
    }
}

#[test]
fn each_peer_receives_the_information_meant_for_it() {
    let f = file(3, "c1");
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3u16)
            .map(|me| {
                let f = &f;
                let info_for = move |peer: u16| vec![me as u8, peer as u8];
                s.spawn(move || exchange_each(f, me, info_for, Duration::from_secs(10)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (me, r) in results.into_iter().enumerate() {
        let peers = r.unwrap();
        assert_eq!(peers.len(), 2);
        for (n, info) in peers {
            assert_eq!(info, vec![n as u8, me as u8], "node {me} from node {n}");
        }
    }
}

#[test]
fn a_process_of_another_cluster_is_refused_with_the_reason() {
    let ours = file(2, "c1");
    let mut theirs = ours.clone();
    theirs.cluster_id = "c2".into();
    let (zero, one) = std::thread::scope(|s| {
        let zero = s.spawn(|| exchange(&ours, 0, b"a", Duration::from_millis(1500)));
        let one = s.spawn(|| exchange(&theirs, 1, b"b", Duration::from_millis(1500)));
        (zero.join().unwrap(), one.join().unwrap())
    });
    let one = one.unwrap_err().to_string();
    assert!(one.contains("refused") && one.contains("\"c2\""), "{one}");
    let zero = zero.unwrap_err().to_string();
    assert!(zero.contains("no exchange with nodes [1]"), "{zero}");
    assert!(zero.contains("cluster id \"c2\""), "{zero}");
}

/// A process that can reach node 0 and names a member, but does not know the secret, is
/// refused on both sides with the reason, and neither learns the other's information.
#[test]
fn a_stranger_without_the_secret_learns_nothing_either_way() {
    let f = file(2, "c1");
    let guess = stranger(&f);
    // The stranger dials as node 1.
    let (zero, one) = std::thread::scope(|s| {
        let zero = s.spawn(|| exchange(&f, 0, b"keys of 0", Duration::from_millis(1500)));
        let one = s.spawn(|| exchange(&guess, 1, b"keys of 1", Duration::from_millis(1500)));
        (zero.join().unwrap(), one.join().unwrap())
    });
    let one = one.unwrap_err().to_string();
    assert!(
        one.contains("is not node 0 of this cluster") && one.contains("does not prove"),
        "the stranger is told node 0 did not prove what it expects: {one}"
    );
    let zero = zero.unwrap_err().to_string();
    assert!(zero.contains("no exchange with nodes [1]"), "{zero}");
    assert!(
        zero.contains("refused this node") || zero.contains("does not verify"),
        "{zero}"
    );
    // The stranger listens as node 0; the member dials it.
    let (zero, one) = std::thread::scope(|s| {
        let zero = s.spawn(|| exchange(&guess, 0, b"keys of 0", Duration::from_millis(1500)));
        let one = s.spawn(|| exchange(&f, 1, b"keys of 1", Duration::from_millis(1500)));
        (zero.join().unwrap(), one.join().unwrap())
    });
    let one = one.unwrap_err().to_string();
    assert!(
        one.contains("is not node 0 of this cluster")
            && one.contains("does not prove it knows the cluster's secret"),
        "{one}"
    );
    let zero = zero.unwrap_err().to_string();
    assert!(
        zero.contains("node 1 refused this node") && zero.contains("without the secret"),
        "the stranger listening hears why: {zero}"
    );
}

/// A hand-driven stranger: it gets node 0's challenge, holds no key, and its made-up
/// proof is refused — and the refusal carries no information of node 0.
#[test]
fn a_made_up_proof_is_refused_and_the_answer_holds_no_information() {
    let f = file(2, "c1");
    let hello = Hello {
        magic: MAGIC.into(),
        cluster_id: "c1".into(),
        node: 1,
        nonce: vec![7; NONCE_BYTES],
    };
    let made_up = Proof::Send {
        info: b"keys of 1".to_vec(),
        proof: vec![0; 32],
    };
    let (zero, challenge, answer) = dial_node_0(&f, &hello, &made_up);
    assert!(
        matches!(challenge, Challenge::Prove { node: 0, .. }),
        "{challenge:?}"
    );
    let Answer::Refuse(reason) = answer else {
        panic!("node 0 answered a stranger with its information: {answer:?}");
    };
    assert!(reason.contains("does not verify"), "{reason}");
    assert!(zero.unwrap_err().to_string().contains("does not verify"));
}

/// A recorded exchange of node 1 with node 0, replayed to node 0 later: node 0's nonce is
/// fresh, so the recorded proof does not verify and it is refused.
#[test]
fn a_replayed_exchange_is_refused() {
    let f = file(2, "c1");
    // Record a real node 1's hello and proof by standing between it and node 0.
    let listener = TcpListener::bind(f.socket_address(0).unwrap()).unwrap();
    let (hello, recorded) = std::thread::scope(|s| {
        let one = s.spawn(|| exchange(&f, 1, b"keys of 1", Duration::from_secs(2)));
        let mut stream = accept_within(&listener, Duration::from_secs(5));
        let hello: Hello = receive(&mut stream).unwrap();
        // Answer as the real node 0 would, with the secret (the recording is of a genuine
        // exchange); then keep node 1's proof.
        challenge_as_node_0(&mut stream, &hello);
        let recorded: Proof = receive(&mut stream).unwrap();
        drop(stream); // node 1 dials again, and gives up at its timeout
        drop(listener);
        let _ = one.join().unwrap();
        (hello, recorded)
    });
    assert!(matches!(recorded, Proof::Send { .. }));
    // Replay both messages to the real node 0.
    let (zero, _, answer) = dial_node_0(&f, &hello, &recorded);
    assert!(
        matches!(&answer, Answer::Refuse(r) if r.contains("replayed")),
        "{answer:?}"
    );
    assert!(zero.unwrap_err().to_string().contains("does not verify"));
}

#[test]
fn a_dialer_whose_connection_breaks_dials_again_and_is_counted_once_it_acknowledged() {
    let f = file(2, "c1");
    let listener = TcpListener::bind(f.socket_address(0).unwrap()).unwrap();
    let (one, acked) = std::thread::scope(|s| {
        let one = s.spawn(|| exchange(&f, 1, b"b", Duration::from_secs(5)));
        // Node 0, by hand: the first connection is dropped after its hello (as a reset
        // would end it), the second is answered and must be acknowledged.
        let accept = || accept_within(&listener, Duration::from_secs(5));
        let mut first = accept();
        let _: Hello = receive(&mut first).unwrap();
        drop(first);
        let mut second = accept();
        let hello: Hello = receive(&mut second).unwrap();
        assert_eq!(hello.node, 1);
        let nonce = challenge_as_node_0(&mut second, &hello);
        let t = transcript(&hello, &nonce);
        let secret = SECRET.as_bytes();
        let Proof::Send { info, proof } = receive(&mut second).unwrap() else {
            panic!("node 1 refused a genuine challenge");
        };
        let info = t
            .open(secret, Role::DialerSends, &info)
            .expect("sealed for us");
        assert!(t.verify(secret, Role::DialerSends, &info, &proof));
        let proof = t.prove(secret, Role::ListenerSends, b"a");
        send(
            &mut second,
            &Answer::Accept {
                info: t.seal(secret, Role::ListenerSends, b"a"),
                proof,
            },
        )
        .unwrap();
        let ack: Ack = receive(&mut second).unwrap();
        (one.join().unwrap(), ack)
    });
    assert_eq!(acked, Ack { node: 1 });
    assert_eq!(one.unwrap()[&0], b"a".to_vec());
}

#[test]
fn a_node_outside_the_file_is_refused() {
    let f = file(2, "c1");
    assert!(matches!(
        exchange(&f, 5, b"x", Duration::from_millis(100)),
        Err(RendezvousError::NotAMember(5))
    ));
    // A process claiming to be node 7 dials node 0.
    let (zero, refused) = std::thread::scope(|s| {
        let zero = s.spawn(|| exchange(&f, 0, b"a", Duration::from_millis(1500)));
        let mut stream = connect(&f, 0);
        let hello = Hello {
            magic: MAGIC.into(),
            cluster_id: "c1".into(),
            node: 7,
            nonce: vec![1; NONCE_BYTES],
        };
        send(&mut stream, &hello).unwrap();
        let answer: Challenge = receive(&mut stream).unwrap();
        (zero.join().unwrap(), answer)
    });
    assert_eq!(
        refused,
        Challenge::Refuse("node 7 is not in the cluster file".into())
    );
    assert!(zero.is_err(), "node 1 never came");
}

#[test]
fn a_cluster_file_whose_secret_cannot_be_had_is_an_error() {
    let mut f = file(2, "c1");
    f.secret = crate::cluster_file::SecretSource::Env("VELOS_NO_SUCH_VARIABLE_FOR_TESTS".into());
    let e = exchange(&f, 0, b"a", Duration::from_millis(100)).unwrap_err();
    assert!(matches!(e, RendezvousError::NoSecret(_)), "{e}");
    assert!(
        e.to_string().contains("VELOS_NO_SUCH_VARIABLE_FOR_TESTS"),
        "{e}"
    );
}

/// The first connection `listener` accepts within `limit` (a panic after it; reads bounded
/// by [`READ_LIMIT`]).
fn accept_within(listener: &TcpListener, limit: Duration) -> TcpStream {
    listener.set_nonblocking(true).unwrap();
    let start = Instant::now();
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                stream.set_read_timeout(Some(READ_LIMIT)).unwrap();
                return stream;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && start.elapsed() < limit => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => panic!("nobody dialed within {limit:?}: {e}"),
        }
    }
}

/// An eavesdropper on the set-up network: every byte of two real nodes' exchange, both
/// ways, recorded by a relay between them, holds none of their information — neither its
/// bytes nor their JSON form — while the nodes learn each other's (and the recording does
/// hold what is meant to be seen: the cluster id in the hello).
#[test]
fn a_recorded_exchange_holds_no_information_in_the_clear() {
    let f = file(2, "c1");
    // Node 1 dials the relay's address, which stands in node 0's place in its file.
    let relay = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut dialer_file = f.clone();
    dialer_file.nodes[0].address = relay.local_addr().unwrap().to_string();
    let secret_0 = b"rkey 0x5eed0001 qpn 4711 gid fe80::1".to_vec();
    let secret_1 = b"rkey 0x5eed0002 qpn 4712 gid fe80::2".to_vec();
    let (zero, one, recorded) = std::thread::scope(|s| {
        let zero = s.spawn(|| exchange(&f, 0, &secret_0, Duration::from_secs(5)));
        let one = s.spawn(|| exchange(&dialer_file, 1, &secret_1, Duration::from_secs(5)));
        // Every wait bounded: whatever the nodes do, the test ends (a node that never
        // dials fails it here, a connection that stalls fails it below).
        let inbound = accept_within(&relay, Duration::from_secs(10));
        let outbound = connect(&f, 0);
        let copy = |mut from: TcpStream, mut to: TcpStream| {
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                match std::io::Read::read(&mut from, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        seen.extend_from_slice(&buf[..n]);
                        if std::io::Write::write_all(&mut to, &buf[..n]).is_err() {
                            break;
                        }
                    }
                }
            }
            let _ = to.shutdown(std::net::Shutdown::Write);
            seen
        };
        let up = {
            let (from, to) = (inbound.try_clone().unwrap(), outbound.try_clone().unwrap());
            s.spawn(move || copy(from, to))
        };
        let down = s.spawn(move || copy(outbound, inbound));
        let (zero, one) = (zero.join().unwrap(), one.join().unwrap());
        let mut recorded = up.join().unwrap();
        recorded.extend(down.join().unwrap());
        (zero, one, recorded)
    });
    assert_eq!(
        zero.unwrap()[&1],
        secret_1,
        "node 0 learned node 1's information"
    );
    assert_eq!(
        one.unwrap()[&0],
        secret_0,
        "node 1 learned node 0's information"
    );
    let holds = |needle: &[u8]| recorded.windows(needle.len()).any(|w| w == needle);
    assert!(holds(b"\"c1\""), "the recording is of the exchange");
    for info in [&secret_0, &secret_1] {
        let json = serde_json::to_vec(info).unwrap();
        let json = &json[1..json.len() - 1]; // the numbers, without the brackets
        for needle in [&info[..], json, b"4711", b"5eed"] {
            assert!(
                !holds(needle),
                "{:?} seen on the wire",
                String::from_utf8_lossy(needle)
            );
        }
    }
}
