//! The lab: `Lab::up` builds the namespaces, links, addresses, neighbours, sysctls and
//! XDP_PASS programs of BENCHMARKS.md; each link answers ping; `up` again is idempotent;
//! `down` (and the drop guard) leave no namespace of the prefix. Root only.

mod common;

use common::{ping, root, run_bounded, SETTLE};
use upfbench::lab::{addr, iface, Lab, LabOptions, Ns};

fn netns_names() -> Vec<String> {
    let mut c = std::process::Command::new("ip");
    c.args(["netns", "list"]);
    let out = run_bounded(c, SETTLE);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

fn sysctl(lab: &Lab, ns: Ns, key: &str) -> String {
    lab.run(ns, &["sysctl", "-n", key])
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn lab_up_twice_links_answer_down_leaves_nothing() {
    if !root() {
        return;
    }
    let prefix = "t-lab-";
    // A leftover of a crashed run: one namespace of the prefix already there.
    let _ = Lab::remove(prefix);
    let mut c = std::process::Command::new("ip");
    c.args(["netns", "add", &format!("{prefix}upf")]);
    assert!(run_bounded(c, SETTLE).status.success());

    let first = Lab::up(prefix).unwrap(); // stays when dropped
    drop(first);
    // Idempotent: up again over a complete lab.
    let lab = Lab::up(prefix).unwrap().down_on_drop();
    let names = netns_names();
    for ns in Ns::ALL {
        assert!(names.contains(&lab.ns(ns)), "{} in {names:?}", lab.ns(ns));
    }

    let show = lab
        .ip(Ns::Gnb, &["-br", "addr", "show", "dev", iface::N3])
        .unwrap();
    for a in [addr::GNB_N3].iter().chain(addr::GNB_N3_EXTRA.iter()) {
        assert!(show.contains(&format!("{a}/24")), "{show}");
    }
    assert!(show.contains("fd00:3::1/64"), "{show}");
    let show = lab
        .ip(Ns::Dn, &["-br", "addr", "show", "dev", iface::N6])
        .unwrap();
    for a in [addr::DN_N6].iter().chain(addr::DN_HOSTS.iter()) {
        assert!(show.contains(&format!("{a}/24")), "{show}");
    }
    let routes = lab.ip(Ns::Dn, &["route"]).unwrap();
    assert!(routes.contains("10.45.0.0/16 via 192.168.6.2"), "{routes}");
    let routes = lab.ip(Ns::Dn, &["-6", "route"]).unwrap();
    assert!(routes.contains("fd00:45::/48 via fd00:6::2"), "{routes}");
    let neigh = lab
        .ip(Ns::Upf, &["neigh", "show", "dev", iface::N3])
        .unwrap();
    assert!(
        neigh.contains("192.168.3.1 lladdr 02:00:00:00:03:01 PERMANENT"),
        "{neigh}"
    );

    assert!(lab.xdp_attached(Ns::Gnb, iface::N3).unwrap());
    assert!(lab.xdp_attached(Ns::Dn, iface::N6).unwrap());
    assert!(!lab.xdp_attached(Ns::Upf, iface::N3).unwrap());
    assert_eq!(sysctl(&lab, Ns::Upf, "net.ipv4.ip_forward"), "1");
    assert_eq!(sysctl(&lab, Ns::Upf, "net.ipv4.conf.all.rp_filter"), "0");
    assert_eq!(sysctl(&lab, Ns::Gnb, "net.ipv4.ip_forward"), "0");
    // Nothing for the kernel to forward past the UPF: no route to the UE pool in upf.
    let routes = lab.ip(Ns::Upf, &["route"]).unwrap();
    assert!(!routes.contains("10.45."), "{routes}");
    let k = lab.run(Ns::Dn, &["ethtool", "-k", iface::N6]).unwrap();
    assert!(k.contains("tx-checksumming: off"), "{k}");

    // Every link, both families where the lab has them (through XDP_PASS on n3 and n6).
    assert_eq!(ping(&lab, Ns::Gnb, None, addr::UPF_N3, 2), 2);
    assert_eq!(ping(&lab, Ns::Upf, None, addr::GNB_N3_EXTRA[4], 1), 1);
    assert_eq!(ping(&lab, Ns::Dn, None, addr::UPF_N6, 2), 2);
    assert_eq!(ping(&lab, Ns::Upf, None, addr::DN_HOSTS[1], 1), 1);
    assert_eq!(ping(&lab, Ns::Smf, None, addr::UPF_N4, 2), 2);
    if common::have("ping") {
        for (ns, dst) in [(Ns::Gnb, "fd00:3::2"), (Ns::Dn, "fd00:6::2")] {
            // -W: the answer may be slow to come; ping returns when it does.
            let mut c = lab.command(ns, "ping");
            c.args(["-6", "-c", "1", "-W", "10", dst]);
            let out = run_bounded(c, SETTLE);
            assert!(out.status.success(), "{ns:?} ping {dst}: {out:?}");
        }
    }

    let removed = lab.down().unwrap();
    assert_eq!(removed.len(), 4);
    assert!(Lab::present(prefix).is_empty());
    assert!(!netns_names().iter().any(|n| n.starts_with(prefix)));
    // Down again: nothing to do, no error.
    assert!(Lab::remove(prefix).unwrap().is_empty());
}

#[test]
fn lab_options_and_drop_guard() {
    if !root() {
        return;
    }
    let prefix = "t-labopt-";
    {
        let lab = Lab::up_with(
            prefix,
            LabOptions {
                forwarding: false,
                xdp_pass: false,
            },
        )
        .unwrap()
        .down_on_drop();
        assert_eq!(sysctl(&lab, Ns::Upf, "net.ipv4.ip_forward"), "0");
        assert_eq!(sysctl(&lab, Ns::Upf, "net.ipv6.conf.all.forwarding"), "0");
        assert!(!lab.xdp_attached(Ns::Gnb, iface::N3).unwrap());
        assert_eq!(Lab::present(prefix).len(), 4);
    }
    assert!(
        Lab::present(prefix).is_empty(),
        "the drop guard removes the lab"
    );
}

#[test]
fn lab_cli_up_status_down() {
    if !root() {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_upfbench");
    let prefix = "t-labcli-";
    let run = |args: &[&str]| {
        let mut c = std::process::Command::new(bin);
        c.args(args);
        // Only a hang bound: a busy machine takes what it takes.
        run_bounded(c, 4 * SETTLE)
    };
    let _guard = Lab::attach(prefix).down_on_drop();
    assert!(run(&["lab", "up", "--prefix", prefix]).status.success());
    assert!(run(&["lab", "up", "--prefix", prefix]).status.success());
    let st = run(&["lab", "status", "--prefix", prefix]);
    assert!(st.status.success());
    assert!(String::from_utf8_lossy(&st.stdout).contains(&format!("{prefix}smf")));
    let down = run(&["lab", "down", "--prefix", prefix]);
    assert!(down.status.success());
    assert!(String::from_utf8_lossy(&down.stdout).contains("removed"));
    assert!(!run(&["lab", "status", "--prefix", prefix]).status.success());
    assert!(Lab::present(prefix).is_empty());
}
