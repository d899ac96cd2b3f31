//! `velos node` refuses bad input with a clear message and exit status 2, never a panic;
//! a build without the verbs backend says how to get one.

use std::process::Command;

fn velos(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_velos"))
        .args(args)
        .output()
        .expect("velos runs");
    (
        out.status.code().expect("an exit status"),
        String::from_utf8(out.stderr).expect("utf-8"),
    )
}

fn cluster_file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("written");
    path.display().to_string()
}

const THREE: &str = "cluster_id = \"demo\"\nsecret = \"0123456789abcdef\"\n\
    [[node]]\nid = 0\naddress = \"127.0.0.1:7400\"\n\
    [[node]]\nid = 1\naddress = \"127.0.0.1:7401\"\n\
    [[node]]\nid = 2\naddress = \"127.0.0.1:7402\"\n";

#[test]
fn bad_input_is_refused_with_its_reason() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = cluster_file(&dir, "three.toml", THREE);
    let (code, err) = velos(&["node", "--config", &file, "--id", "7"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("node 7 is not in the cluster file"), "{err}");
    let (code, err) = velos(&["node", "--config", "/nonexistent/c.toml", "--id", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot read the cluster file"), "{err}");
    // Cluster files refused, and what each refusal says.
    let bad_files = [
        (
            "bad.toml",
            "cluster_id = \"x\"\nsecret = \"0123456789abcdef\"\n[[node]]\nid = 1\naddress = \"a:1\"\n",
            "node ids must be 0 to 0",
        ),
        (
            "open.toml",
            "cluster_id = \"x\"\n[[node]]\nid = 0\naddress = \"a:1\"\n",
            "open.toml:1: no secret",
        ),
        (
            "env.toml",
            "cluster_id = \"x\"\nsecret_env = \"VELOS_NO_SUCH_SECRET_VARIABLE\"\n\
             [[node]]\nid = 0\naddress = \"a:1\"\n",
            "VELOS_NO_SUCH_SECRET_VARIABLE",
        ),
    ];
    for (name, text, says) in bad_files {
        let path = cluster_file(&dir, name, text);
        let (code, err) = velos(&["node", "--config", &path, "--id", "0"]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
    }
    let (code, err) = velos(&["node", "--config", &file, "--id", "0", "--value-size", "3"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("'--value-size") && err.contains("3 is not in 10..=65536 bytes"),
        "{err}"
    );
    // An incarnation is a joining process's only.
    let (code, err) = velos(&["node", "--config", &file, "--id", "2", "--incarnation", "5"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--join"), "{err}");
    // A durable log runs through the embedding handle; a recovery needs its directory and
    // is no join.
    let data = dir.path().join("data");
    let data = data.to_str().expect("utf-8");
    let base = ["node", "--config", &file, "--id", "0"];
    let refused: [(&[&str], &str); 4] = [
        (&["--data-dir", data], "--embed"),
        (&["--snapshot-every", "4"], "--embed"),
        (&["--embed", "--recover"], "--data-dir"),
        (
            &["--embed", "--data-dir", data, "--recover", "--join"],
            "--join",
        ),
    ];
    for (more, says) in refused {
        let (code, err) = velos(&[&base[..], more].concat());
        assert_eq!(code, 2, "{more:?}: {err}");
        assert!(err.contains(says), "{more:?}: {err}");
    }
}

#[cfg(not(feature = "verbs"))]
#[test]
fn a_build_without_rdma_says_how_to_get_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = cluster_file(&dir, "three.toml", THREE);
    let data = dir.path().join("data");
    let data = data.to_str().expect("utf-8");
    for more in [&[][..], &["--embed", "--data-dir", data, "--recover"][..]] {
        let (code, err) = velos(&[&["node", "--config", &file, "--id", "0"][..], more].concat());
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("--features verbs"), "{err}");
    }
    assert!(
        !dir.path().join("data").exists(),
        "refused before touching the disk"
    );
}
