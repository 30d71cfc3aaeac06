//! The traffic models of BENCHMARKS.md ("Traffic models from the field"), as packet-size
//! mixes and per-subscriber rates the generator can produce.
//!
//! The generator is stateless: HTTP is modelled by its packets' sizes and rates (UDP
//! packets of those sizes), not by TCP connections; the application mix ([`apps`]) sends
//! its HTTP share as TCP segments to and from port 80 (TCP-shaped: no handshake, no
//! state, which the data path does not track). Sizes are those of the user's IP packet
//! (the inner packet of a G-PDU).

use crate::report::Direction;

/// IP packet sizes and their weights (a weight is a count of packets per cycle).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mix {
    pub name: &'static str,
    pub sizes: Vec<(u16, u32)>,
}

impl Mix {
    pub fn single(bytes: u16) -> Mix {
        Mix {
            name: "fixed",
            sizes: vec![(bytes, 1)],
        }
    }

    /// Average IP packet size, bytes.
    pub fn average(&self) -> f64 {
        let n: u64 = self.sizes.iter().map(|&(_, w)| u64::from(w)).sum();
        let b: u64 = self
            .sizes
            .iter()
            .map(|&(s, w)| u64::from(s) * u64::from(w))
            .sum();
        b as f64 / n.max(1) as f64
    }

    /// The size shown in tables: the average, rounded.
    pub fn label_bytes(&self) -> u32 {
        self.average().round() as u32
    }
}

/// The carrier capacity test (Free5GC cloud evaluation, Spirent Landslide): per
/// subscriber UL 2089 kbit/s at 422 pps (UDP 567.2 kbit/s at 175 pps + HTTP 1522.2 kbit/s
/// at 247 pps), DL 3948 kbit/s at 696 pps (UDP 1617.2 kbit/s at 375 pps + HTTP 2331.6
/// kbit/s at 321 pps).
pub mod carrier {
    use super::*;

    /// Packets per second per subscriber.
    pub fn pps(dir: Direction) -> u64 {
        match dir {
            Direction::Uplink => 175 + 247,
            Direction::Downlink => 375 + 321,
        }
    }

    /// The size mix giving each component's bit rate at its packet rate: UL UDP 405 B
    /// (567.2 kbit/s / 175 pps), HTTP 770 B (1522.2 / 247); DL UDP 539 B (1617.2 / 375),
    /// HTTP 908 B (2331.6 / 321). Weights in the ratio of the packet rates.
    pub fn mix(dir: Direction) -> Mix {
        match dir {
            Direction::Uplink => Mix {
                name: "carrier UL (UDP 405 B + HTTP 770 B)",
                sizes: vec![(405, 7), (770, 10)],
            },
            Direction::Downlink => Mix {
                name: "carrier DL (UDP 539 B + HTTP 908 B)",
                sizes: vec![(539, 7), (908, 6)],
            },
        }
    }

    /// Subscriber steps: 100, 500, 1000, 2000, then doubling up to `max`.
    pub fn steps(max: u64) -> Vec<u64> {
        let mut v: Vec<u64> = [100, 500, 1000, 2000]
            .into_iter()
            .filter(|&u| u <= max)
            .collect();
        let mut u = 4000;
        while u <= max {
            v.push(u);
            u *= 2;
        }
        v
    }
}

/// The operator UPF model of the ZTE/Intel cloud-native UPF: HTTP 85 % / UDP 15 % of
/// packets, 690 B average. HTTP as a 1:1 mix of 64 B (acknowledgements) and 1316 B (data)
/// packets, UDP at 690 B: (17 x 64 + 17 x 1316 + 6 x 690) / 40 = 690 B.
pub fn zte() -> Mix {
    Mix {
        name: "ZTE (HTTP 85 % / UDP 15 %, 690 B average)",
        sizes: vec![(64, 17), (1316, 17), (690, 6)],
    }
}

/// The vEPC model of Affirmed/Intel: UDP, 650 B.
pub fn vepc() -> Mix {
    Mix {
        name: "vEPC (UDP 650 B)",
        sizes: vec![(650, 1)],
    }
}

/// The application mix (issue 16): ZTE's 85 % HTTP / 15 % UDP with named applications,
/// each detected by a flow description (what a generator at line rate hits without a TLS
/// handshake or DNS answer) and counted by its own URR.
pub mod apps {
    use super::*;
    use crate::smf::{AppPfds, AppRule};

    /// The application of the HTTP share.
    pub const WEB: &str = "web";
    /// The application of the UDP share.
    pub const VOICE: &str = "voice";
    /// IP sizes sent as TCP segments (HTTP: acknowledgements and data).
    pub const TCP_SIZES: [u16; 2] = [64, 1316];
    /// web's flow description: TCP from port 80 of the data network's hosts.
    pub const WEB_FLOW: &str = "permit out tcp from 192.168.6.0/24 80 to assigned";
    /// voice's: UDP to the UE's ports 40000-40999 (the generator's UE port is 40000).
    pub const VOICE_FLOW: &str = "permit out udp from 192.168.6.0/24 to assigned 40000-40999";

    /// ZTE's sizes with the HTTP share as TCP: (17 x 64 + 17 x 1316) TCP, 6 x 690 UDP.
    pub fn mix() -> Mix {
        Mix {
            name: "application mix (HTTP 85 % as TCP port 80 / UDP 15 %, 690 B average)",
            sizes: zte().sizes,
        }
    }

    /// Share of `mix()`'s packets that are TCP (web), percent.
    pub fn tcp_share_pct() -> f64 {
        let m = mix();
        let all: u32 = m.sizes.iter().map(|s| s.1).sum();
        let tcp: u32 = m
            .sizes
            .iter()
            .filter(|s| TCP_SIZES.contains(&s.0))
            .map(|s| s.1)
            .sum();
        f64::from(tcp) * 100.0 / f64::from(all.max(1))
    }

    /// The PFDs PFD Management provisions.
    pub fn pfds() -> Vec<AppPfds> {
        vec![
            AppPfds {
                id: WEB.into(),
                flows: vec![WEB_FLOW.into()],
                ..AppPfds::default()
            },
            AppPfds {
                id: VOICE.into(),
                flows: vec![VOICE_FLOW.into()],
                ..AppPfds::default()
            },
        ]
    }

    /// Every session's application PDRs: web (k = 0, URR 2), voice (k = 1, URR 3).
    pub fn rules() -> Vec<AppRule> {
        [WEB, VOICE]
            .iter()
            .map(|id| AppRule {
                id: id.to_string(),
                ..AppRule::default()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carrier_mixes_give_the_published_bit_rates() {
        // Per subscriber, bit/s = pps x average size x 8, within 1 % of the paper's.
        for (dir, kbps) in [(Direction::Uplink, 2089.0), (Direction::Downlink, 3948.0)] {
            let bps = carrier::pps(dir) as f64 * carrier::mix(dir).average() * 8.0;
            assert!((bps / 1e3 / kbps - 1.0).abs() < 0.01, "{dir}: {bps}");
        }
        assert_eq!(zte().label_bytes(), 690);
        assert_eq!(vepc().label_bytes(), 650);
    }

    #[test]
    fn the_application_mix_is_zte_with_its_http_as_tcp() {
        assert_eq!(apps::mix().sizes, zte().sizes);
        assert_eq!(apps::mix().label_bytes(), 690);
        assert!((apps::tcp_share_pct() - 85.0).abs() < 1e-9);
        let ids: Vec<String> = apps::pfds().into_iter().map(|p| p.id).collect();
        let rules: Vec<String> = apps::rules().into_iter().map(|r| r.id).collect();
        assert_eq!(ids, rules);
    }

    #[test]
    fn carrier_steps() {
        assert_eq!(carrier::steps(2000), vec![100, 500, 1000, 2000]);
        assert_eq!(
            carrier::steps(16000),
            vec![100, 500, 1000, 2000, 4000, 8000, 16000]
        );
        assert_eq!(carrier::steps(700), vec![100, 500]);
    }
}
