//! Tests of the parent module.

use super::*;
use crate::facts::FactSource;

#[test]
fn each_plugin_has_its_own_event_budget_across_calls() {
    // What the WIT promises: 10 events per plugin per minute, however
    // many calls it makes (the budget outlives each call's state).
    let limits = GuestOutputLimits::default();
    let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
    let kept = (0..3)
        .flat_map(|_call| 0..30)
        .filter(|_| limits.admit(&a, true) == Admit::Yes)
        .count();
    assert_eq!(kept, EVENTS_PER_WINDOW as usize);
    assert_eq!(limits.counts("a").events_dropped, 90 - 10);
    // Another plugin's budget is untouched, and so is `a`'s log budget.
    assert_eq!(limits.admit(&b, true), Admit::Yes);
    assert_eq!(limits.admit(&a, false), Admit::Yes);
}

#[test]
fn the_open_at_replaced_is_wasmtime_wasis() {
    let engine = wasmtime::Engine::default();
    let mut linker = Linker::<CallState>::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
    // wasmtime-wasi defines `open-at` in the instance the host names:
    // another definition of it, not shadowing, is refused.
    let again = |linker: &mut Linker<CallState>| {
        linker
            .instance(WASI_FILESYSTEM_TYPES)
            .and_then(|mut i| i.func_wrap("[method]descriptor.open-at", |_, (): ()| Ok(())))
    };
    assert!(again(&mut linker).is_err());
    // The host's replaces it, and leaves the linker refusing others.
    add_to_linker(&mut linker).unwrap();
    assert!(again(&mut linker).is_err());
}

/// A fake procfs root holding every file of the view, each `<name> 1`.
fn fake_proc() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    for f in proc_view::PROC_FILES {
        std::fs::write(root.path().join(f), format!("{f} 1\n")).unwrap();
    }
    root
}

/// A sandbox with the filtered view of `root` preopened at `/proc`, in
/// the pass of `facts`.
fn proc_sandbox(facts: &Arc<Facts>, root: &Path) -> (CallContext, Preopens) {
    let ctx = CallContext {
        facts: facts.clone(),
        ..CallContext::default()
    };
    let snap = facts.proc_view(root).unwrap();
    let host = snap.path().to_owned();
    let preopens = Preopens {
        dirs: vec![Preopen {
            id: facts.dir_id(&host),
            host,
            guest: "/proc".into(),
        }],
        may_block: false,
        snapshots: vec![(root.to_owned(), snap)],
    };
    (ctx, preopens)
}

fn call_state(ctx: CallContext, preopens: Preopens) -> CallState {
    CallState::new(
        Arc::from("p"),
        Arc::default(),
        ctx,
        preopens,
        16 << 20,
        Duration::from_secs(1),
        GuestOutputLimits::default(),
    )
    .unwrap()
}

/// The guest's descriptor of its preopen `/proc`.
fn proc_dir(state: &mut CallState) -> Resource<fs::Descriptor> {
    use wasmtime_wasi::filesystem::WasiFilesystemView;
    use wasmtime_wasi::p2::bindings::filesystem::preopens::Host;
    let dirs = Host::get_directories(&mut state.filesystem()).unwrap();
    let (dir, _) = dirs
        .into_iter()
        .find(|(_, g)| g == "/proc")
        .expect("preopened");
    dir
}

/// Opens `path` in `dir` as a guest does (through the linker's
/// `open-at`), for reading.
fn open(
    state: &mut CallState,
    dir: &Resource<fs::Descriptor>,
    path: &str,
    oflags: fs::OpenFlags,
) -> Result<Resource<fs::Descriptor>, fs::ErrorCode> {
    let fd = Resource::new_borrow(dir.rep());
    crate::block_on(open_at(
        state,
        fd,
        fs::PathFlags::empty(),
        path.into(),
        oflags,
        fs::DescriptorFlags::READ,
    ))
    .unwrap()
}

/// The text of the open file `fd`, from its start.
fn text(state: &CallState, fd: &Resource<fs::Descriptor>) -> String {
    use std::os::unix::fs::FileExt;
    let Ok(fs::Descriptor::File(f)) = state.table.get(fd) else {
        panic!("not a file");
    };
    let mut buf = vec![0; 256];
    let n = f.file.read_at(&mut buf, 0).unwrap();
    String::from_utf8(buf[..n].to_vec()).unwrap()
}

/// Opens `path` in `dir`, reads it and closes it.
fn read(state: &mut CallState, dir: &Resource<fs::Descriptor>, path: &str) -> String {
    let fd = open(state, dir, path, fs::OpenFlags::empty()).expect("opens");
    let t = text(state, &fd);
    state.table.delete(fd).unwrap();
    t
}

#[test]
fn a_guests_open_copies_the_proc_file_once_a_pass() {
    let root = fake_proc();
    let source = FactSource::host();
    let facts = Arc::new(Facts::new(source.clone()));
    let (ctx, preopens) = proc_sandbox(&facts, root.path());
    drop(facts);
    let mut state = call_state(ctx, preopens);
    let dir = proc_dir(&mut state);
    assert_eq!(source.proc_files_read(), 0, "nothing read before an open");
    assert_eq!(read(&mut state, &dir, "meminfo"), "meminfo 1\n");
    assert_eq!(source.proc_files_read(), 1);
    assert_eq!(state.trace.reads(), 1, "the open is in the call's trace");
    // Opened again in the pass, by any path to it: the pass's copy.
    std::fs::write(root.path().join("meminfo"), "meminfo 2\n").unwrap();
    assert_eq!(read(&mut state, &dir, "./meminfo"), "meminfo 1\n");
    assert_eq!(read(&mut state, &dir, "sys/../loadavg"), "loadavg 1\n");
    assert_eq!(source.proc_files_read(), 2, "two files opened: two read");
    // The same directory opened again through the preopen.
    let again = open(&mut state, &dir, ".", fs::OpenFlags::DIRECTORY).unwrap();
    assert_eq!(read(&mut state, &again, "stat"), "stat 1\n");
    assert_eq!(source.proc_files_read(), 3);
    // What the view does not hold stays absent, and is not read.
    assert_eq!(
        open(&mut state, &dir, "self/environ", fs::OpenFlags::empty()).unwrap_err(),
        fs::ErrorCode::NoEntry
    );
    assert_eq!(source.proc_files_read(), 3);
    // A descriptor the guest keeps (a kept instance) into the next pass.
    let kept = open(&mut state, &dir, "meminfo", fs::OpenFlags::empty()).unwrap();
    state.release();

    // The next pass, the store reused: what the guest opened before is
    // copied anew as the store is readied (meminfo, loadavg, stat),
    // so the kept descriptor reads this pass's text.
    let facts = Arc::new(Facts::new(source.clone()));
    let (ctx, preopens) = proc_sandbox(&facts, root.path());
    drop(facts);
    assert!(state.serves(&preopens), "the same directory, reused");
    state.renew(ctx, preopens);
    assert_eq!(source.proc_files_read(), 6);
    // They are inputs of the next call too, opened again or not (its
    // trace: crate::trace).
    assert_eq!(state.trace.reads(), 3);
    assert_eq!(text(&state, &kept), "meminfo 2\n");
    assert_eq!(read(&mut state, &dir, "meminfo"), "meminfo 2\n");
    assert_eq!(source.proc_files_read(), 6, "copied once in the pass");
    state.table.delete(kept).unwrap();
    state.release();

    // A fresh store in a third pass reads only what it opens.
    std::fs::write(root.path().join("vmstat"), "vmstat 3\n").unwrap();
    let facts = Arc::new(Facts::new(source.clone()));
    let (ctx, preopens) = proc_sandbox(&facts, root.path());
    drop(facts);
    let mut fresh = call_state(ctx, preopens);
    let dir = proc_dir(&mut fresh);
    assert_eq!(read(&mut fresh, &dir, "vmstat"), "vmstat 3\n");
    assert_eq!(source.proc_files_read(), 7);
}
