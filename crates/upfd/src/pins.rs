//! The data path outliving upfd (`state.directory`): the kernel empties a program array
//! once no process holds it open and no BPF filesystem pins it, and the stages live only
//! in the program arrays `calls` and `calls_cpu` (bpf/include/pipeline.h). Without a pin
//! the entry programs, still attached after upfd ends, would find no stage and drop every
//! packet (`unsupported`) until the next upfd took over, and that upfd could not reuse
//! the data path ([`upf_bpf::datapath::Datapath::adopt`] needs all of it).
//!
//! So upfd pins the two arrays and `xdp_n3_cpu` (used only through the cpumap, which
//! holds it only while spreading) in `state.pin_directory`/Node ID, a directory per data
//! path named after its `sess_pages` table's kernel ID (the ID the state names). Once a
//! restarted upfd has taken over, the pins of every other data path go (the old programs
//! are off the interfaces then, and their tables are freed); when upfd ends for good
//! (detaching), its own go.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use upf_bpf::libbpf_rs::{self, MapCore, MapHandle, MapType};

/// What is pinned of a data path: its program arrays and the program only the cpumap
/// refers to.
pub const PINNED: [&str; 3] = ["calls", "calls_cpu", "xdp_n3_cpu"];

/// statfs(2)'s f_type of a BPF filesystem.
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

/// What pins a data path's program arrays.
#[derive(Debug, Clone)]
pub struct Pins {
    /// `state.pin_directory`/dp-ID.
    pub dir: PathBuf,
}

fn subdir(root: &Path, sess_pages_id: u32) -> PathBuf {
    root.join(format!("dp-{sess_pages_id}"))
}

/// Whether `p` is on a BPF filesystem.
fn on_bpffs(p: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statfs writes into the zeroed struct we own; the path is NUL-terminated.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::statfs(c.as_ptr(), &mut s) };
    r == 0 && s.f_type as i64 == BPF_FS_MAGIC
}

fn pin_fd(fd: BorrowedFd<'_>, at: &Path) -> Result<(), String> {
    let c = std::ffi::CString::new(at.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: a valid fd and a NUL-terminated path; a negative result is an error.
    let r = unsafe { libbpf_rs::libbpf_sys::bpf_obj_pin(fd.as_raw_fd(), c.as_ptr()) };
    if r < 0 {
        return Err(format!(
            "pinning {}: {}",
            at.display(),
            std::io::Error::from_raw_os_error(-r)
        ));
    }
    Ok(())
}

/// What to pin of the running data path whose sessions' table is `sess_pages_id`,
/// found by kernel IDs (as [`upf_bpf::datapath::Datapath::adopt`] finds it; needs
/// CAP_SYS_ADMIN): the program arrays of its programs and `xdp_n3_cpu`.
pub fn running(sess_pages_id: u32) -> Result<Vec<(String, OwnedFd)>, String> {
    let opts = libbpf_rs::query::ProgInfoQueryOptions::default().include_map_ids(true);
    let progs: Vec<(String, u32, Vec<u32>)> = libbpf_rs::query::ProgInfoIter::with_query_opts(opts)
        .filter(|p| p.map_ids.contains(&sess_pages_id))
        .map(|p| (p.name.to_string_lossy().into_owned(), p.id, p.map_ids))
        .collect();
    if progs.is_empty() {
        return Err(format!("no loaded program uses table {sess_pages_id}"));
    }
    let mut v = Vec::new();
    for (name, id, _) in progs.iter().filter(|(n, _, _)| n == "xdp_n3_cpu") {
        // SAFETY: no preconditions; a negative result is an error.
        let fd = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_fd_by_id(*id) };
        if fd < 0 {
            return Err(format!(
                "program {id}: {}",
                std::io::Error::from_raw_os_error(-fd)
            ));
        }
        // SAFETY: a fresh fd we own.
        v.push((name.clone(), unsafe { OwnedFd::from_raw_fd(fd) }));
    }
    let mut maps: Vec<u32> = progs.iter().flat_map(|p| p.2.iter().copied()).collect();
    maps.sort_unstable();
    maps.dedup();
    for id in maps {
        let m = MapHandle::from_map_id(id).map_err(|e| format!("table {id}: {e}"))?;
        if m.map_type() == MapType::ProgArray {
            let fd = m.as_fd().try_clone_to_owned().map_err(|e| e.to_string())?;
            v.push((m.name().to_string_lossy().into_owned(), fd));
        }
    }
    Ok(v)
}

/// Pin `objects` (name, fd) of the data path whose sessions' table is `sess_pages_id` in
/// `root`/dp-ID; what is pinned there already (a reused data path's) stays.
pub fn pin(
    root: &Path,
    sess_pages_id: u32,
    objects: &[(String, BorrowedFd<'_>)],
) -> Result<Pins, String> {
    std::fs::create_dir_all(root).map_err(|e| format!("{}: {e}", root.display()))?;
    if !on_bpffs(root) {
        return Err(format!(
            "{} is not on a BPF filesystem (mount -t bpf bpf /sys/fs/bpf)",
            root.display()
        ));
    }
    let dir = subdir(root, sess_pages_id);
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    }
    for (name, fd) in objects {
        let at = dir.join(name);
        if !at.exists() {
            pin_fd(*fd, &at)?;
        }
    }
    Ok(Pins { dir })
}

/// Whether `root` holds the pins of the data path whose sessions' table is
/// `sess_pages_id` (those objects, all of them).
pub fn pinned(root: &Path, sess_pages_id: u32, names: &[&str]) -> Option<Pins> {
    let dir = subdir(root, sess_pages_id);
    names
        .iter()
        .all(|n| dir.join(n).exists())
        .then_some(Pins { dir })
}

impl Pins {
    /// Remove these pins (upfd ends for good: its data path goes with it).
    pub fn remove(&self) {
        remove_dir(&self.dir);
    }
}

fn remove_dir(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let _ = std::fs::remove_file(e.path());
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// Remove the pins of every data path in `root` but `keep`'s (those upfds before this
/// one left running, now replaced): how many data paths' pins went.
pub fn remove_others(root: &Path, keep: Option<&Path>) -> usize {
    let Ok(rd) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut n = 0;
    for e in rd.flatten() {
        let p = e.path();
        let ours = e.file_name().as_bytes().starts_with(b"dp-");
        if ours && Some(p.as_path()) != keep {
            remove_dir(&p);
            n += 1;
        }
    }
    n
}
