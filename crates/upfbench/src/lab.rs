//! The lab of BENCHMARKS.md: four network namespaces joined by veth pairs, made and
//! removed with iproute2, so that a UPF, an SMF emulator, a gNB/UE emulator and a data
//! network run on one machine with only addresses of their own.
//!
//! ```text
//!   {P}gnb                      {P}upf                        {P}dn
//!   n3 192.168.3.1/24  ------  n3 192.168.3.2/24
//!      .11-.15 (more gNBs)      n6 192.168.6.2/24  ------  n6 192.168.6.1/24
//!      fd00:3::1/64             fd00:3::2/64                  .10 .11 (DN hosts)
//!                                                             .20 .21 .22 (app servers)
//!      [XDP_PASS]               fd00:6::2/64                  fd00:6::1/64  [XDP_PASS]
//!                               n4 192.168.4.2/24             10.45.0.0/16 via 192.168.6.2
//!   {P}smf                         |                          10.64.0.0/10 via 192.168.6.2
//!   n4 192.168.4.1/24  ------------+                          fd00:45::/48 via fd00:6::2
//!      (192.168.4.3: the capacity run's second SMF, while its application mix runs)
//! ```
//!
//! 10.45.0.0/16 is the UE pool of the lab's examples and tests; 10.64.0.0/10 that of
//! `upfbench capacity`, `sessions` and `soak` ([`addr::BENCH_UE_POOL`]), so that a UE of
//! theirs can be answered from dn by hand too.
//!
//! `upfbench lab up [--prefix P]` builds it, `upfbench lab down [--prefix P]` removes it;
//! both are idempotent, and `up` first removes what a crashed run of the same prefix left.
//! Every interface is created directly inside its namespace, so deleting the four
//! namespaces removes everything (a veth pair dies with either end).
//!
//! What the lab sets, and why:
//! - Fixed MAC addresses ([`mac`]) and permanent neighbour entries on both sides of every
//!   link: a packet generator can write Ethernet headers from constants, an XDP data path
//!   that uses `bpf_fib_lookup` finds its next hop without ARP, and no ARP/ND exchange
//!   appears in a measurement.
//! - An XDP_PASS program (`bench_bpf::PASS_OBJECT`, native mode) on the far ends of N3 and
//!   N6 (gnb `n3`, dn `n6`): a veth only accepts frames XDP_REDIRECTed into its peer when
//!   that peer runs an XDP program.
//! - Transmit checksum offload off (`ethtool -K n3 tx off` in gnb, `n6` in dn): those ends
//!   send what the UPF's XDP programs receive and redirect; a redirected frame loses the
//!   skb's "checksum not yet computed" (CHECKSUM_PARTIAL) state, so without this a TCP
//!   segment from the data network would reach the UE with an unfinished checksum and be
//!   dropped. It also turns TSO off there, so the UPF sees wire-sized frames.
//! - Reverse-path filtering off (`rp_filter=0`, all and default) and ICMP redirects off in
//!   every namespace: UE addresses arrive on interfaces that have no route back to them.
//! - IP forwarding on in upf (IPv4 and IPv6), off everywhere else: the XDP data path
//!   finds next hops with `bpf_fib_lookup`, which answers `BPF_FIB_LKUP_RET_FWD_DISABLED`
//!   on an interface without forwarding. The kernel still cannot carry user traffic past
//!   the UPF's XDP programs: upf has no route to the UE pools, and GTP-U on N3 is addressed
//!   to upf itself, so a packet the fast path hands up by mistake is dropped (a downlink one
//!   with an ICMP unreachable towards dn), never routed on and counted as forwarded.
//!   [`LabOptions::forwarding`] off (`lab up --no-forwarding`) is for a data path with
//!   static neighbours only.
//! - Router advertisements and duplicate address detection off (`accept_ra=0`,
//!   `accept_dad=0`, and `nodad` on the IPv6 addresses), so addresses work at once.
//! - Loopback up in every namespace.
//!
//! ```no_run
//! use upfbench::lab::{addr, Lab, Ns};
//! let lab = Lab::up("t-")?.down_on_drop();
//! let out = lab.run(Ns::Gnb, &["ping", "-c", "1", "-W", "1", &addr::UPF_N3.to_string()])?;
//! lab.down()?;
//! # Ok::<(), upfbench::lab::LabError>(())
//! ```

use std::ffi::OsStr;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Output, Stdio};

/// The four namespaces of the lab, by role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ns {
    /// The gNB/UE emulator (N3 side).
    Gnb,
    /// The UPF under test.
    Upf,
    /// The data network (N6 side).
    Dn,
    /// The SMF emulator (N4 side).
    Smf,
}

impl Ns {
    /// Every namespace, in the order they are made.
    pub const ALL: [Ns; 4] = [Ns::Gnb, Ns::Upf, Ns::Dn, Ns::Smf];

    /// The name without prefix: `gnb`, `upf`, `dn`, `smf`.
    pub fn role(self) -> &'static str {
        match self {
            Ns::Gnb => "gnb",
            Ns::Upf => "upf",
            Ns::Dn => "dn",
            Ns::Smf => "smf",
        }
    }
}

/// Interface names (the same on both ends of each veth pair).
pub mod iface {
    /// N3, gnb <-> upf.
    pub const N3: &str = "n3";
    /// N6, upf <-> dn.
    pub const N6: &str = "n6";
    /// N4, smf <-> upf.
    pub const N4: &str = "n4";
}

/// Addresses of the lab.
pub mod addr {
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// Prefix length of every IPv4 link.
    pub const V4_PREFIX_LEN: u8 = 24;
    /// Prefix length of every IPv6 link.
    pub const V6_PREFIX_LEN: u8 = 64;

    /// gnb `n3`: the gNB's N3 address.
    pub const GNB_N3: Ipv4Addr = Ipv4Addr::new(192, 168, 3, 1);
    /// More gNB addresses on gnb `n3`, for tests with several gNBs.
    pub const GNB_N3_EXTRA: [Ipv4Addr; 5] = [
        Ipv4Addr::new(192, 168, 3, 11),
        Ipv4Addr::new(192, 168, 3, 12),
        Ipv4Addr::new(192, 168, 3, 13),
        Ipv4Addr::new(192, 168, 3, 14),
        Ipv4Addr::new(192, 168, 3, 15),
    ];
    /// upf `n3`: the UPF's N3 address (uplink F-TEIDs).
    pub const UPF_N3: Ipv4Addr = Ipv4Addr::new(192, 168, 3, 2);
    /// upf `n6`.
    pub const UPF_N6: Ipv4Addr = Ipv4Addr::new(192, 168, 6, 2);
    /// dn `n6`: the data network's first address (iperf3 server, ping target).
    pub const DN_N6: Ipv4Addr = Ipv4Addr::new(192, 168, 6, 1);
    /// The two data-network hosts of the carrier capacity test, also on dn `n6`.
    pub const DN_HOSTS: [Ipv4Addr; 2] = [
        Ipv4Addr::new(192, 168, 6, 10),
        Ipv4Addr::new(192, 168, 6, 11),
    ];
    /// Application servers on dn `n6` ([`super::DnServices`]: each a name in the DNS,
    /// with HTTP and HTTPS), apart from the hosts above so that what a test learns about
    /// them (an application detected by their DNS answers) touches no other test traffic.
    pub const DN_APPS: [Ipv4Addr; 3] = [
        Ipv4Addr::new(192, 168, 6, 20),
        Ipv4Addr::new(192, 168, 6, 21),
        Ipv4Addr::new(192, 168, 6, 22),
    ];
    /// smf `n4`: the SMF's PFCP address.
    pub const SMF_N4: Ipv4Addr = Ipv4Addr::new(192, 168, 4, 1);
    /// upf `n4`: the UPF's PFCP address.
    pub const UPF_N4: Ipv4Addr = Ipv4Addr::new(192, 168, 4, 2);
    /// The UE pool (routed to the UPF in dn).
    pub const UE_POOL: Ipv4Addr = Ipv4Addr::new(10, 45, 0, 0);
    /// Prefix length of [`UE_POOL`].
    pub const UE_POOL_LEN: u8 = 16;
    /// The UE pool of the benchmarks' SMF emulator (`upfbench capacity`, `sessions`,
    /// `soak`: 4M addresses), routed to the UPF in dn like [`UE_POOL`].
    pub const BENCH_UE_POOL: Ipv4Addr = Ipv4Addr::new(10, 64, 0, 0);
    /// Prefix length of [`BENCH_UE_POOL`].
    pub const BENCH_UE_POOL_LEN: u8 = 10;

    /// gnb `n3`, IPv6.
    pub const GNB_N3_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 3, 0, 0, 0, 0, 0, 1);
    /// upf `n3`, IPv6.
    pub const UPF_N3_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 3, 0, 0, 0, 0, 0, 2);
    /// upf `n6`, IPv6.
    pub const UPF_N6_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 6, 0, 0, 0, 0, 0, 2);
    /// dn `n6`, IPv6.
    pub const DN_N6_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 6, 0, 0, 0, 0, 0, 1);
    /// The IPv6 UE pool (routed to the UPF in dn).
    pub const UE_POOL_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x45, 0, 0, 0, 0, 0, 0);
    /// Prefix length of [`UE_POOL_V6`].
    pub const UE_POOL_V6_LEN: u8 = 48;
}

/// MAC addresses of the lab's interfaces (locally administered, fixed).
pub mod mac {
    /// gnb `n3`.
    pub const GNB_N3: [u8; 6] = [0x02, 0, 0, 0, 0x03, 0x01];
    /// upf `n3`.
    pub const UPF_N3: [u8; 6] = [0x02, 0, 0, 0, 0x03, 0x02];
    /// upf `n6`.
    pub const UPF_N6: [u8; 6] = [0x02, 0, 0, 0, 0x06, 0x02];
    /// dn `n6`.
    pub const DN_N6: [u8; 6] = [0x02, 0, 0, 0, 0x06, 0x01];
    /// smf `n4`.
    pub const SMF_N4: [u8; 6] = [0x02, 0, 0, 0, 0x04, 0x01];
    /// upf `n4`.
    pub const UPF_N4: [u8; 6] = [0x02, 0, 0, 0, 0x04, 0x02];

    /// `02:00:00:00:03:01` form.
    pub fn fmt(m: [u8; 6]) -> String {
        m.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    }
}

/// Choices that change how the UPF namespace behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabOptions {
    /// IP forwarding in upf (IPv4 and IPv6). On by default: `bpf_fib_lookup` needs it;
    /// see the module docs.
    pub forwarding: bool,
    /// Attach XDP_PASS to gnb `n3` and dn `n6` (default on).
    pub xdp_pass: bool,
}

impl Default for LabOptions {
    fn default() -> Self {
        LabOptions {
            forwarding: true,
            xdp_pass: true,
        }
    }
}

/// A step of building or removing the lab failed.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A command could not be started.
    #[error("{command}: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    /// A command exited with an error.
    #[error("{command}: exit {status}: {stderr}")]
    Failed {
        command: String,
        status: String,
        stderr: String,
    },
    /// Something else the lab needs (a temporary file, a namespace) failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    /// The lab was built but is not what it should be.
    #[error("lab check: {0}")]
    Check(String),
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `cmd` (stdin: `input` if given), returns its stdout, fails on a non-zero exit.
fn run_cmd(mut cmd: Command, input: Option<&str>) -> Result<String, LabError> {
    let command = describe(&cmd);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = cmd.spawn().map_err(|source| LabError::Spawn {
        command: command.clone(),
        source,
    })?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin
            .write_all(text.as_bytes())
            .map_err(|source| LabError::Spawn {
                command: command.clone(),
                source,
            })?;
    }
    let out = child.wait_with_output().map_err(|source| LabError::Spawn {
        command: command.clone(),
        source,
    })?;
    if !out.status.success() {
        return Err(LabError::Failed {
            command,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `/var/run/netns/NAME`, where `ip netns add` keeps a named namespace.
pub fn netns_path(name: &str) -> PathBuf {
    Path::new("/var/run/netns").join(name)
}

/// The named network namespaces that exist now (`ip netns list`).
pub fn netns_list() -> Vec<String> {
    let mut c = Command::new("ip");
    c.args(["netns", "list"]);
    let Ok(out) = run_cmd(c, None) else {
        return Vec::new();
    };
    out.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Moves the calling thread into the named network namespace (`setns`). Only this thread
/// moves; sockets and TUN devices it creates afterwards belong to that namespace for
/// their whole life, whichever thread uses them later.
pub fn enter_netns(name: &str) -> std::io::Result<()> {
    let f = std::fs::File::open(netns_path(name))?;
    // SAFETY: setns on a valid open namespace file descriptor; affects this thread only.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Runs `f` on a new thread inside the named network namespace (the caller's thread does
/// not move); `None` runs it on a new thread in the caller's namespace.
pub fn in_netns<T: Send>(name: Option<&str>, f: impl FnOnce() -> T + Send) -> std::io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(n) = name {
                enter_netns(n)?;
            }
            Ok(f())
        })
        .join()
        .map_err(|_| std::io::Error::other("thread in network namespace panicked"))?
    })
}

fn ip_cmd(ns: Option<&str>) -> Command {
    let mut c = Command::new("ip");
    if let Some(ns) = ns {
        c.args(["-n", ns]);
    }
    c
}

/// A lab of one prefix. Dropping it leaves the lab in place unless
/// [`Lab::down_on_drop`] was called.
#[derive(Debug)]
pub struct Lab {
    prefix: String,
    options: LabOptions,
    down_on_drop: bool,
}

impl Lab {
    /// Builds the lab with [`LabOptions::default`], after removing what a previous lab of
    /// the same prefix left.
    pub fn up(prefix: &str) -> Result<Lab, LabError> {
        Lab::up_with(prefix, LabOptions::default())
    }

    /// Builds the lab with `options`.
    pub fn up_with(prefix: &str, options: LabOptions) -> Result<Lab, LabError> {
        Lab::remove(prefix)?;
        // From here on, a failure removes what was made.
        let lab = Lab {
            prefix: prefix.to_string(),
            options,
            down_on_drop: true,
        };
        lab.build()?;
        Ok(lab.keep())
    }

    /// A handle on the lab of `prefix` as it is (nothing is made or checked).
    pub fn attach(prefix: &str) -> Lab {
        Lab {
            prefix: prefix.to_string(),
            options: LabOptions::default(),
            down_on_drop: false,
        }
    }

    /// Removes the lab when this value is dropped (for tests: a failing test cleans up).
    pub fn down_on_drop(mut self) -> Lab {
        self.down_on_drop = true;
        self
    }

    /// Leaves the lab in place when this value is dropped (the default after `up`).
    pub fn keep(mut self) -> Lab {
        self.down_on_drop = false;
        self
    }

    /// Removes the lab.
    pub fn down(mut self) -> Result<Vec<String>, LabError> {
        self.down_on_drop = false;
        Lab::remove(&self.prefix)
    }

    /// Deletes the namespaces of `prefix` that exist (`ip netns del`), which removes their
    /// interfaces. Returns the names deleted. Processes still inside a namespace keep it
    /// alive, nameless, until they exit: they are listed on stderr, not killed.
    pub fn remove(prefix: &str) -> Result<Vec<String>, LabError> {
        let mut removed = Vec::new();
        for ns in Ns::ALL {
            let name = format!("{prefix}{}", ns.role());
            if !netns_path(&name).exists() {
                continue;
            }
            let pids = {
                let mut c = Command::new("ip");
                c.args(["netns", "pids", &name]);
                run_cmd(c, None).unwrap_or_default()
            };
            let pids: Vec<&str> = pids.split_whitespace().collect();
            if !pids.is_empty() {
                eprintln!(
                    "lab: processes still in {name}: {} (the namespace lives on until they exit)",
                    pids.join(" ")
                );
            }
            let mut c = Command::new("ip");
            c.args(["netns", "del", &name]);
            run_cmd(c, None)?;
            removed.push(name);
        }
        Ok(removed)
    }

    /// The namespaces of `prefix` that exist now.
    pub fn present(prefix: &str) -> Vec<String> {
        Ns::ALL
            .iter()
            .map(|ns| format!("{prefix}{}", ns.role()))
            .filter(|n| netns_path(n).exists())
            .collect()
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The options the lab was built with (the defaults for [`Lab::attach`]).
    pub fn options(&self) -> LabOptions {
        self.options
    }

    /// The full name of a namespace: prefix + role.
    pub fn ns(&self, ns: Ns) -> String {
        format!("{}{}", self.prefix, ns.role())
    }

    /// `ip netns exec NS program`: a command to run inside a namespace.
    pub fn command(&self, ns: Ns, program: impl AsRef<OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(ns)]).arg(program);
        c
    }

    /// Runs `args` (program first) inside a namespace; returns its output whatever the
    /// exit status.
    pub fn exec(&self, ns: Ns, args: &[&str]) -> std::io::Result<Output> {
        let (program, rest) = args
            .split_first()
            .ok_or_else(|| std::io::Error::other("empty command"))?;
        let mut c = self.command(ns, program);
        c.args(rest).stdin(Stdio::null());
        c.output()
    }

    /// Runs `args` inside a namespace; its stdout, or an error on a non-zero exit.
    pub fn run(&self, ns: Ns, args: &[&str]) -> Result<String, LabError> {
        let (program, rest) = args
            .split_first()
            .ok_or_else(|| LabError::Check("empty command".into()))?;
        let mut c = self.command(ns, program);
        c.args(rest);
        run_cmd(c, None)
    }

    /// `ip -n NS ARGS...`; its stdout.
    pub fn ip(&self, ns: Ns, args: &[&str]) -> Result<String, LabError> {
        let mut c = ip_cmd(Some(&self.ns(ns)));
        c.args(args);
        run_cmd(c, None)
    }

    /// `ip [-6] -n NS -batch -` with `lines` on stdin.
    fn ip_batch(&self, ns: Ns, v6: bool, lines: &[String]) -> Result<(), LabError> {
        if lines.is_empty() {
            return Ok(());
        }
        let mut c = ip_cmd(Some(&self.ns(ns)));
        if v6 {
            c.arg("-6");
        }
        c.args(["-batch", "-"]);
        let mut text = lines.join("\n");
        text.push('\n');
        run_cmd(c, Some(&text)).map(drop)
    }

    fn sysctl(&self, ns: Ns, settings: &[(&str, &str)]) -> Result<(), LabError> {
        let mut c = self.command(ns, "sysctl");
        c.arg("-q");
        for (k, v) in settings {
            c.arg("-w").arg(format!("{k}={v}"));
        }
        run_cmd(c, None).map(drop)
    }

    fn build(&self) -> Result<(), LabError> {
        for ns in Ns::ALL {
            let mut c = Command::new("ip");
            c.args(["netns", "add", &self.ns(ns)]);
            run_cmd(c, None)?;
        }
        // Before the links exist, so that the "default" values apply to them.
        let forwarding = if self.options.forwarding { "1" } else { "0" };
        for ns in Ns::ALL {
            let fwd = if ns == Ns::Upf { forwarding } else { "0" };
            self.sysctl(
                ns,
                &[
                    ("net.ipv4.ip_forward", fwd),
                    ("net.ipv6.conf.all.forwarding", fwd),
                    ("net.ipv4.conf.all.rp_filter", "0"),
                    ("net.ipv4.conf.default.rp_filter", "0"),
                    ("net.ipv4.conf.all.send_redirects", "0"),
                    ("net.ipv4.conf.default.send_redirects", "0"),
                    ("net.ipv6.conf.all.accept_ra", "0"),
                    ("net.ipv6.conf.default.accept_ra", "0"),
                    ("net.ipv6.conf.all.accept_dad", "0"),
                    ("net.ipv6.conf.default.accept_dad", "0"),
                ],
            )?;
        }
        let links = [
            (Ns::Gnb, mac::GNB_N3, Ns::Upf, mac::UPF_N3, iface::N3),
            (Ns::Upf, mac::UPF_N6, Ns::Dn, mac::DN_N6, iface::N6),
            (Ns::Smf, mac::SMF_N4, Ns::Upf, mac::UPF_N4, iface::N4),
        ];
        for (a, a_mac, b, b_mac, name) in links {
            let mut c = Command::new("ip");
            c.args(["link", "add", name, "netns", &self.ns(a), "address"])
                .arg(mac::fmt(a_mac))
                .args(["type", "veth", "peer", "name", name, "netns", &self.ns(b)])
                .arg("address")
                .arg(mac::fmt(b_mac));
            run_cmd(c, None)?;
        }

        let v4 = |a: Ipv4Addr| format!("{a}/{}", addr::V4_PREFIX_LEN);
        let v6 = |a: Ipv6Addr| format!("{a}/{}", addr::V6_PREFIX_LEN);
        let neigh = |a: IpAddr, m: [u8; 6], dev: &str| {
            format!(
                "neigh replace {a} lladdr {} dev {dev} nud permanent",
                mac::fmt(m)
            )
        };
        let up = |dev: &str| format!("link set dev {dev} up");

        // gnb
        let mut l = vec![up("lo"), up(iface::N3)];
        l.push(format!("addr add {} dev n3", v4(addr::GNB_N3)));
        for a in addr::GNB_N3_EXTRA {
            l.push(format!("addr add {} dev n3", v4(a)));
        }
        l.push(neigh(addr::UPF_N3.into(), mac::UPF_N3, iface::N3));
        self.ip_batch(Ns::Gnb, false, &l)?;
        self.ip_batch(
            Ns::Gnb,
            true,
            &[
                format!("addr add {} dev n3 nodad", v6(addr::GNB_N3_V6)),
                neigh(addr::UPF_N3_V6.into(), mac::UPF_N3, iface::N3),
            ],
        )?;

        // upf
        let mut l = vec![up("lo"), up(iface::N3), up(iface::N6), up(iface::N4)];
        l.push(format!("addr add {} dev n3", v4(addr::UPF_N3)));
        l.push(format!("addr add {} dev n6", v4(addr::UPF_N6)));
        l.push(format!("addr add {} dev n4", v4(addr::UPF_N4)));
        l.push(neigh(addr::GNB_N3.into(), mac::GNB_N3, iface::N3));
        for a in addr::GNB_N3_EXTRA {
            l.push(neigh(a.into(), mac::GNB_N3, iface::N3));
        }
        l.push(neigh(addr::DN_N6.into(), mac::DN_N6, iface::N6));
        for a in addr::DN_HOSTS.iter().chain(&addr::DN_APPS) {
            l.push(neigh((*a).into(), mac::DN_N6, iface::N6));
        }
        l.push(neigh(addr::SMF_N4.into(), mac::SMF_N4, iface::N4));
        self.ip_batch(Ns::Upf, false, &l)?;
        self.ip_batch(
            Ns::Upf,
            true,
            &[
                format!("addr add {} dev n3 nodad", v6(addr::UPF_N3_V6)),
                format!("addr add {} dev n6 nodad", v6(addr::UPF_N6_V6)),
                neigh(addr::GNB_N3_V6.into(), mac::GNB_N3, iface::N3),
                neigh(addr::DN_N6_V6.into(), mac::DN_N6, iface::N6),
            ],
        )?;

        // dn
        let mut l = vec![up("lo"), up(iface::N6)];
        l.push(format!("addr add {} dev n6", v4(addr::DN_N6)));
        for a in addr::DN_HOSTS.iter().chain(&addr::DN_APPS) {
            l.push(format!("addr add {} dev n6", v4(*a)));
        }
        l.push(neigh(addr::UPF_N6.into(), mac::UPF_N6, iface::N6));
        for (pool, len) in [
            (addr::UE_POOL, addr::UE_POOL_LEN),
            (addr::BENCH_UE_POOL, addr::BENCH_UE_POOL_LEN),
        ] {
            l.push(format!(
                "route add {pool}/{len} via {} dev n6",
                addr::UPF_N6
            ));
        }
        self.ip_batch(Ns::Dn, false, &l)?;
        self.ip_batch(
            Ns::Dn,
            true,
            &[
                format!("addr add {} dev n6 nodad", v6(addr::DN_N6_V6)),
                neigh(addr::UPF_N6_V6.into(), mac::UPF_N6, iface::N6),
                format!(
                    "route add {}/{} via {} dev n6",
                    addr::UE_POOL_V6,
                    addr::UE_POOL_V6_LEN,
                    addr::UPF_N6_V6
                ),
            ],
        )?;

        // smf
        self.ip_batch(
            Ns::Smf,
            false,
            &[
                up("lo"),
                up(iface::N4),
                format!("addr add {} dev n4", v4(addr::SMF_N4)),
                neigh(addr::UPF_N4.into(), mac::UPF_N4, iface::N4),
            ],
        )?;

        // Per device too, whatever the defaults were when the devices were made.
        self.sysctl(
            Ns::Upf,
            &[
                ("net.ipv4.conf.n3.rp_filter", "0"),
                ("net.ipv4.conf.n6.rp_filter", "0"),
                ("net.ipv4.conf.n4.rp_filter", "0"),
            ],
        )?;

        // Transmit checksum offload off where frames enter the UPF's XDP programs.
        for (ns, dev) in [(Ns::Gnb, iface::N3), (Ns::Dn, iface::N6)] {
            let mut c = self.command(ns, "ethtool");
            c.args(["-K", dev, "tx", "off"]);
            run_cmd(c, None)?;
        }

        if self.options.xdp_pass {
            self.attach_xdp_pass()?;
        }
        Ok(())
    }

    /// Attaches XDP_PASS (native mode) to gnb `n3` and dn `n6`.
    fn attach_xdp_pass(&self) -> Result<(), LabError> {
        let path = std::env::temp_dir().join(format!(
            "upfbench-xdp-pass-{}-{}.o",
            std::process::id(),
            self.prefix.replace('/', "_")
        ));
        std::fs::write(&path, bench_bpf::PASS_OBJECT).map_err(|source| LabError::Io {
            what: format!("writing {}", path.display()),
            source,
        })?;
        let result = (|| {
            for (ns, dev) in [(Ns::Gnb, iface::N3), (Ns::Dn, iface::N6)] {
                let mut c = ip_cmd(Some(&self.ns(ns)));
                c.args(["link", "set", "dev", dev, "xdpdrv", "obj"])
                    .arg(&path)
                    .args(["sec", "xdp"]);
                run_cmd(c, None)?;
            }
            Ok(())
        })();
        let _ = std::fs::remove_file(&path);
        result
    }

    /// Whether an XDP program is attached to `dev` in `ns` (`ip -j link show`).
    pub fn xdp_attached(&self, ns: Ns, dev: &str) -> Result<bool, LabError> {
        let out = self.ip(ns, &["-j", "link", "show", "dev", dev])?;
        let v: serde_json::Value = serde_json::from_str(&out)
            .map_err(|e| LabError::Check(format!("ip -j link show {dev}: {e}")))?;
        Ok(v.get(0)
            .and_then(|l| l.get("xdp"))
            .and_then(|x| x.get("prog"))
            .is_some())
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if self.down_on_drop {
            if let Err(e) = Lab::remove(&self.prefix) {
                eprintln!("lab {}: removing on drop: {e}", self.prefix);
            }
        }
    }
}

/// What the data network serves ([`DnServices`]): DNS names and files over HTTP and HTTPS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnServicesConfig {
    /// A records dnsmasq answers (the name and every name below it).
    pub records: Vec<(String, Ipv4Addr)>,
    /// TTL of those answers, seconds (dnsmasq's default for its own records is 0, which
    /// an application detector must not learn from).
    pub ttl: u32,
    /// Where dnsmasq listens (port 53).
    pub dns: Ipv4Addr,
    /// Where the web server listens: port 80 (HTTP/1.0) and 443 (HTTPS, a self-signed
    /// certificate made at start) on each.
    pub web: Vec<Ipv4Addr>,
    /// Files served, by name (`/NAME`) and size in octets.
    pub files: Vec<(String, usize)>,
}

impl Default for DnServicesConfig {
    fn default() -> Self {
        DnServicesConfig {
            records: Vec::new(),
            ttl: 300,
            dns: addr::DN_N6,
            web: std::iter::once(addr::DN_N6).chain(addr::DN_APPS).collect(),
            files: vec![("file".into(), 100_000)],
        }
    }
}

/// The programs [`DnServices`] runs, and the clients a UE uses with them: (program, the
/// Debian package it comes in).
pub const DN_TOOLS: [(&str, &str); 5] = [
    ("dnsmasq", "dnsmasq-base"),
    ("python3", "python3"),
    ("openssl", "openssl"),
    ("curl", "curl"),
    ("dig", "bind9-dnsutils"),
];

/// Where `program` is: PATH, then the sbin directories (dnsmasq is in /usr/sbin).
pub fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// The tools of [`DN_TOOLS`] that are missing, as "program (package)".
pub fn missing_dn_tools() -> Vec<String> {
    DN_TOOLS
        .iter()
        .filter(|(p, _)| find_program(p).is_none())
        .map(|(p, pkg)| format!("{p} (Debian package {pkg})"))
        .collect()
}

/// The web server: HTTP/1.0 and HTTPS on port 80 and 443 of each address, files from a
/// directory, no logging. Ready when it prints "ready".
const WEB_SERVER: &str = r#"
import http.server, ssl, sys, threading
root, cert, key, addrs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")
class H(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **k):
        super().__init__(*a, directory=root, **k)
    def log_message(self, *a):
        pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
servers = []
for a in addrs:
    for port, tls in ((80, False), (443, True)):
        s = http.server.ThreadingHTTPServer((a, port), H)
        if tls:
            s.socket = ctx.wrap_socket(s.socket, server_side=True)
        servers.append(s)
for s in servers:
    threading.Thread(target=s.serve_forever, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"#;

/// dnsmasq and a web server (HTTP and HTTPS) in the lab's dn namespace, for the UEs'
/// ordinary tools (dig, curl): the data network of application detection
/// (docs/application-detection.md). Both processes are killed, and their directory
/// removed, on drop.
#[derive(Debug)]
pub struct DnServices {
    dnsmasq: std::process::Child,
    web: std::process::Child,
    dir: PathBuf,
    config: DnServicesConfig,
}

impl DnServices {
    /// Start both in `lab`'s dn namespace and wait until they answer (at most 10 s).
    pub fn start(lab: &Lab, config: DnServicesConfig) -> Result<DnServices, LabError> {
        let missing = missing_dn_tools();
        if !missing.is_empty() {
            return Err(LabError::Check(format!(
                "the data network's services need {}: install them (scripts/deps.sh does)",
                missing.join(", ")
            )));
        }
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "upfbench-dn-{}-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            lab.prefix.replace('/', "_")
        ));
        let io = |what: String| move |source| LabError::Io { what, source };
        let www = dir.join("www");
        std::fs::create_dir_all(&www).map_err(io(format!("creating {}", www.display())))?;
        // From here on, a failure removes the directory (and kills what was started).
        let mut started: Vec<std::process::Child> = Vec::new();
        let result = (|| {
            for (name, size) in &config.files {
                let body: Vec<u8> = (0..*size).map(|i| b'a' + (i % 26) as u8).collect();
                let p = www.join(name);
                std::fs::write(&p, body).map_err(io(format!("writing {}", p.display())))?;
            }
            let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
            let mut san = String::from("subjectAltName=DNS:localhost");
            for (n, _) in &config.records {
                san.push_str(&format!(",DNS:{n},DNS:*.{n}"));
            }
            let mut c = Command::new(find_program("openssl").unwrap_or("openssl".into()));
            c.args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
                .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
                .args(["-subj", "/CN=upfbench-dn", "-addext", &san])
                .arg("-keyout")
                .arg(&key)
                .arg("-out")
                .arg(&cert);
            run_cmd(c, None)?;

            let mut c = lab.command(Ns::Dn, find_program("dnsmasq").unwrap_or("dnsmasq".into()));
            c.args([
                "--keep-in-foreground",
                "--conf-file=/dev/null",
                "--no-resolv",
            ])
            .args([
                "--no-hosts",
                "--bind-interfaces",
                "--user=root",
                "--port=53",
            ])
            .arg(format!("--listen-address={}", config.dns))
            .arg(format!("--local-ttl={}", config.ttl))
            .arg(format!("--pid-file={}", dir.join("dnsmasq.pid").display()));
            for (name, a) in &config.records {
                c.arg(format!("--address=/{name}/{a}"));
            }
            c.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            started.push(c.spawn().map_err(|source| LabError::Spawn {
                command: "dnsmasq".into(),
                source,
            })?);

            let script = dir.join("web.py");
            std::fs::write(&script, WEB_SERVER)
                .map_err(io(format!("writing {}", script.display())))?;
            let addrs: Vec<String> = config.web.iter().map(|a| a.to_string()).collect();
            let mut c = lab.command(Ns::Dn, find_program("python3").unwrap_or("python3".into()));
            c.arg(&script)
                .arg(&www)
                .arg(&cert)
                .arg(&key)
                .arg(addrs.join(","))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut web = c.spawn().map_err(|source| LabError::Spawn {
                command: "python3 web server".into(),
                source,
            })?;
            let stdout = web.stdout.take();
            started.push(web);
            // "ready" on stdout, or the end of it (the server failed).
            let (tx, rx) = std::sync::mpsc::channel();
            if let Some(out) = stdout {
                std::thread::spawn(move || {
                    use std::io::BufRead;
                    let mut line = String::new();
                    let _ = std::io::BufReader::new(out).read_line(&mut line);
                    let _ = tx.send(line);
                });
            }
            let line = rx
                .recv_timeout(std::time::Duration::from_secs(10))
                .unwrap_or_default();
            if line.trim() != "ready" {
                let web = started.pop().expect("pushed above");
                let err = kill(web);
                return Err(LabError::Check(format!(
                    "the web server in {} did not start in 10 s: {}",
                    lab.ns(Ns::Dn),
                    err.trim()
                )));
            }
            // dnsmasq answers (from dn itself) when a name of it resolves.
            if let Some((name, _)) = config.records.first() {
                let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
                loop {
                    let out = lab.exec(
                        Ns::Dn,
                        &[
                            "dig",
                            &format!("@{}", config.dns),
                            "+short",
                            "+time=1",
                            "+tries=1",
                            name,
                        ],
                    );
                    if out.is_ok_and(|o| !o.stdout.is_empty()) {
                        break;
                    }
                    if let Ok(Some(st)) = started[0].try_wait() {
                        return Err(LabError::Check(format!(
                            "dnsmasq in {} exited: {st}",
                            lab.ns(Ns::Dn)
                        )));
                    }
                    if std::time::Instant::now() >= end {
                        return Err(LabError::Check(format!(
                            "dnsmasq in {} does not answer for {name} after 10 s",
                            lab.ns(Ns::Dn)
                        )));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            }
            Ok(())
        })();
        match result {
            Ok(()) => {
                let web = started.pop().expect("web server");
                let dnsmasq = started.pop().expect("dnsmasq");
                Ok(DnServices {
                    dnsmasq,
                    web,
                    dir,
                    config,
                })
            }
            Err(e) => {
                for c in started {
                    let _ = kill(c);
                }
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    pub fn config(&self) -> &DnServicesConfig {
        &self.config
    }

    /// The size of a served file.
    pub fn file_size(&self, name: &str) -> Option<usize> {
        self.config
            .files
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| *s)
    }

    /// Whether both processes still run.
    pub fn running(&mut self) -> bool {
        matches!(self.dnsmasq.try_wait(), Ok(None)) && matches!(self.web.try_wait(), Ok(None))
    }
}

/// Kill a child and reap it; its stderr, if it was piped.
fn kill(mut c: std::process::Child) -> String {
    let _ = c.kill();
    let _ = c.wait();
    let mut err = String::new();
    if let Some(mut e) = c.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    err
}

impl Drop for DnServices {
    fn drop(&mut self) {
        for c in [&mut self.dnsmasq, &mut self.web] {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `upfbench lab up|down`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

/// What `upfbench lab` does.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Build the lab (after removing the leftovers of the same prefix).
    Up {
        /// Namespace name prefix: {P}gnb, {P}upf, {P}dn, {P}smf.
        #[arg(long, default_value = "")]
        prefix: String,
        /// IP forwarding off in upf (default on, which bpf_fib_lookup needs).
        #[arg(long)]
        no_forwarding: bool,
        /// Do not attach XDP_PASS to gnb n3 and dn n6.
        #[arg(long)]
        no_xdp_pass: bool,
    },
    /// Remove the lab's namespaces (and with them its interfaces).
    Down {
        /// Namespace name prefix.
        #[arg(long, default_value = "")]
        prefix: String,
    },
    /// Serve DNS (dnsmasq), HTTP and HTTPS in dn (a running lab's) until SIGINT or
    /// SIGTERM or --seconds: see DnServices.
    Serve {
        /// Namespace name prefix.
        #[arg(long, default_value = "")]
        prefix: String,
        /// An A record NAME=ADDRESS (the name and every name below it); repeat.
        #[arg(long = "record")]
        records: Vec<String>,
        /// TTL of the answers, seconds.
        #[arg(long, default_value_t = 300)]
        ttl: u32,
        /// A served file NAME=OCTETS (default: file=100000); repeat.
        #[arg(long = "file")]
        files: Vec<String>,
        /// Stop after this many seconds (0: at SIGINT or SIGTERM).
        #[arg(long, default_value_t = 0)]
        seconds: u64,
    },
    /// Show which namespaces of the prefix exist.
    Status {
        /// Namespace name prefix.
        #[arg(long, default_value = "")]
        prefix: String,
    },
}

/// Runs `upfbench lab`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::Up {
            prefix,
            no_forwarding,
            no_xdp_pass,
        } => {
            let forwarding = !no_forwarding;
            let lab = Lab::up_with(
                &prefix,
                LabOptions {
                    forwarding,
                    xdp_pass: !no_xdp_pass,
                },
            )?;
            println!(
                "lab up: namespaces {} {} {} {}; gnb n3 {} <-> upf n3 {}; upf n6 {} <-> dn n6 {}; smf n4 {} <-> upf n4 {}; forwarding in upf {}; XDP_PASS on gnb n3, dn n6: {}",
                lab.ns(Ns::Gnb),
                lab.ns(Ns::Upf),
                lab.ns(Ns::Dn),
                lab.ns(Ns::Smf),
                addr::GNB_N3,
                addr::UPF_N3,
                addr::UPF_N6,
                addr::DN_N6,
                addr::SMF_N4,
                addr::UPF_N4,
                if forwarding { "on" } else { "off" },
                if no_xdp_pass { "no" } else { "yes" },
            );
            Ok(ExitCode::SUCCESS)
        }
        Action::Down { prefix } => {
            let removed = Lab::remove(&prefix)?;
            if removed.is_empty() {
                println!("lab down: nothing to remove");
            } else {
                println!("lab down: removed {}", removed.join(" "));
            }
            Ok(ExitCode::SUCCESS)
        }
        Action::Serve {
            prefix,
            records,
            ttl,
            files,
            seconds,
        } => serve(&prefix, &records, ttl, &files, seconds),
        Action::Status { prefix } => {
            let present = Lab::present(&prefix);
            if present.is_empty() {
                println!("lab: no namespace of prefix {prefix:?}");
                Ok(ExitCode::from(1))
            } else {
                println!("lab: {}", present.join(" "));
                Ok(ExitCode::SUCCESS)
            }
        }
    }
}

static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// `NAME=VALUE`.
fn pair<T: std::str::FromStr>(s: &str) -> anyhow::Result<(String, T)>
where
    T::Err: std::fmt::Display,
{
    let (n, v) = s
        .split_once('=')
        .ok_or_else(|| anyhow::anyhow!("{s:?}: expected NAME=VALUE"))?;
    let v = v
        .parse()
        .map_err(|e| anyhow::anyhow!("{s:?}: {v:?}: {e}"))?;
    Ok((n.to_string(), v))
}

fn serve(
    prefix: &str,
    records: &[String],
    ttl: u32,
    files: &[String],
    seconds: u64,
) -> anyhow::Result<ExitCode> {
    let lab = Lab::attach(prefix);
    if !netns_path(&lab.ns(Ns::Dn)).exists() {
        anyhow::bail!("no namespace {}: `upfbench lab up` first", lab.ns(Ns::Dn));
    }
    let mut config = DnServicesConfig {
        records: records.iter().map(|r| pair(r)).collect::<Result<_, _>>()?,
        ttl,
        ..DnServicesConfig::default()
    };
    if !files.is_empty() {
        config.files = files.iter().map(|f| pair(f)).collect::<Result<_, _>>()?;
    }
    // SAFETY: installing an async-signal-safe handler (one atomic store).
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let mut services = DnServices::start(&lab, config)?;
    let c = services.config().clone();
    eprintln!(
        "lab serve: DNS on {}:53 ({}), HTTP :80 and HTTPS :443 on {}, files {}",
        c.dns,
        c.records
            .iter()
            .map(|(n, a)| format!("{n} -> {a}"))
            .collect::<Vec<_>>()
            .join(", "),
        c.web
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(" "),
        c.files
            .iter()
            .map(|(n, s)| format!("/{n} ({s} octets)"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let start = std::time::Instant::now();
    while !STOP.load(std::sync::atomic::Ordering::Relaxed) {
        if seconds > 0 && start.elapsed().as_secs() >= seconds {
            break;
        }
        if !services.running() {
            anyhow::bail!("dnsmasq or the web server exited");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    drop(services);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let lab = Lab::attach("t-x-");
        assert_eq!(lab.ns(Ns::Gnb), "t-x-gnb");
        assert_eq!(Lab::attach("").ns(Ns::Dn), "dn");
        assert_eq!(mac::fmt(mac::GNB_N3), "02:00:00:00:03:01");
        assert_eq!(netns_path("gnb"), Path::new("/var/run/netns/gnb"));
    }
}
