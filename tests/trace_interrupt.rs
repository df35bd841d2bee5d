//! Ctrl-C while tracing: the traced command is killed, the tracer exits 130.

#[test]
fn ctrl_c_kills_the_traced_command_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let script = format!("echo $$ > {}; exec sleep 30", pidfile.display());
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("roofline"))
        .args(["measure", "--backend", "trace", "--", "/bin/sh", "-c", &script])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !pidfile.exists() || std::fs::read_to_string(&pidfile).unwrap().trim().is_empty() {
        assert!(t0.elapsed().as_secs() < 20, "the traced shell never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let traced: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(130));
    assert!(
        !std::path::Path::new(&format!("/proc/{traced}")).exists(),
        "the traced command survived"
    );
}
