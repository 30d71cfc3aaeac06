//! Step 4: the carrier capacity test (`models::carrier`), and from step 6's no-drop rates
//! the subscribers the rig itself allows.

use super::models;
use super::steps::{rig, Run};
use crate::report::{CapacityRow, CapacityTable, Direction, NoDropRate, TrafficModel};

impl Run<'_> {
    /// Step 4: 100, 500, 1000, 2000 subscribers, then doubling, until the loss passes
    /// 0.01 % in either direction; both directions at once at the model's rates.
    pub fn carrier(&mut self) -> anyhow::Result<()> {
        let rig = rig(&mut self.rig)?;
        let mix_ul = models::carrier::mix(Direction::Uplink);
        let mix_dl = models::carrier::mix(Direction::Downlink);
        let mut rows = Vec::new();
        for users in models::carrier::steps(self.plan.carrier_max_users) {
            self.progress
                .step(&format!("carrier test, {users} subscribers"));
            rig.set_sessions(&self.sessions[..users as usize])?;
            let t = rig.trial(
                &[
                    (
                        Direction::Uplink,
                        &mix_ul,
                        Some(users * models::carrier::pps(Direction::Uplink)),
                    ),
                    (
                        Direction::Downlink,
                        &mix_dl,
                        Some(users * models::carrier::pps(Direction::Downlink)),
                    ),
                ],
                self.plan.trial_secs,
            )?;
            let row = CapacityRow {
                users,
                ul_gbps: t.received_pps(Direction::Uplink) * mix_ul.average() * 8.0 / 1e9,
                ul_loss_pct: t.loss_pct(Direction::Uplink),
                dl_gbps: t.received_pps(Direction::Downlink) * mix_dl.average() * 8.0 / 1e9,
                dl_loss_pct: t.loss_pct(Direction::Downlink),
                ul_mpps: t.received_pps(Direction::Uplink) / 1e6,
                dl_mpps: t.received_pps(Direction::Downlink) / 1e6,
            };
            let over = row.ul_loss_pct > 0.01 || row.dl_loss_pct > 0.01;
            rows.push(row);
            if over {
                break;
            }
        }
        self.report.capacity = Some(CapacityTable {
            model: TrafficModel::Carrier,
            rows,
            rig_users: None,
        });
        rig.set_sessions(&self.sessions)?;
        Ok(())
    }
}

/// The carrier test's subscribers the rig allows: both directions share the forwarding
/// CPU, each subscriber taking UL pps / rig UL + DL pps / rig DL of it.
pub(super) fn carrier_users_allowed(no_drop: &[NoDropRate]) -> Option<u64> {
    let share = |d: Direction| -> Option<f64> {
        let rig = no_drop.iter().find(|n| n.direction == d)?.rig_mpps? * 1e6;
        (rig > 0.0).then(|| models::carrier::pps(d) as f64 / rig)
    };
    let per_user = share(Direction::Uplink)? + share(Direction::Downlink)?;
    // The epsilon keeps an exact quotient from flooring one short.
    Some((1.0 / per_user + 1e-9).floor() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rig_allows_the_subscribers_whose_packets_fill_both_directions_shares() {
        let nd = |d, rig| NoDropRate {
            direction: d,
            packet_bytes: 650,
            sessions: 1,
            mpps: 0.0,
            gbps: 0.0,
            curve: Vec::new(),
            rig_mpps: rig,
        };
        // 422 + 696 pps per subscriber: 1000 of them take half of each direction's rate.
        let v = [
            nd(Direction::Uplink, Some(0.844)),
            nd(Direction::Downlink, Some(1.392)),
        ];
        assert_eq!(carrier_users_allowed(&v), Some(1000));
        assert_eq!(
            carrier_users_allowed(&[nd(Direction::Uplink, Some(1.0))]),
            None,
            "both directions needed"
        );
    }
}
