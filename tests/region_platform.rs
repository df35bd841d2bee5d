//! The region API's sessions follow the one platform identification every command uses, so
//! `set_platform` (`--platform`) reaches them. Its own test binary: the choice is global to
//! the process.

use roofline::Platform;
use roofline::{Backend, Session};
use roofline::{set_platform, this_platform};

#[test]
fn sessions_report_the_platform_set_for_the_process() {
    let here = this_platform().map(|p| p.key);
    // A platform other than this machine's, a different one each run.
    let others: Vec<String> = Platform::embedded()
        .into_iter()
        .map(|p| p.key)
        .filter(|k| Some(k) != here.as_ref())
        .collect();
    let pick = &others[(std::process::id() as usize) % others.len()];
    set_platform(pick).unwrap();
    assert_eq!(roofline::__private::perf::identify_platform().map(|p| p.key).as_ref(), Some(pick));
    let mut s = Session::new(Backend::Analytic).unwrap();
    let v: u64 = s.region("sum", || (1..=100u64).sum()).unwrap();
    assert_eq!(v, 5050);
    let r = s.report();
    assert_eq!(r.machine["microarchitecture"].as_str(), Some(pick.as_str()), "{:?}", r.machine);
}
