//! One definition of the numbers the data path shares with upfd (bpf/include/abi.h):
//! what Rust uses (`upf::abi`, generated from the header's text by crates/upf/build.rs)
//! must be what clang compiled (the enums in the BTF of bpf/upf.bpf.c), every enum,
//! member and value, in both directions. A constant changed on one side alone, or a
//! header the generator misread, fails here. Needs no privileges.

use std::collections::BTreeMap;

use libbpf_rs::btf::{types, Btf, BtfType};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::AsRawLibbpf;

#[test]
fn generated_constants_are_the_objects_btf() {
    let mut obj = std::mem::MaybeUninit::uninit();
    let open = upf_bpf::upf::UpfSkelBuilder::default()
        .open(&mut obj)
        .expect("open the object");
    let raw = open.open_object().as_libbpf_object();
    // SAFETY: the object lives as long as `open`, which outlives `btf`.
    let btf = Btf::from_bpf_object(unsafe { raw.as_ref() })
        .expect("BTF")
        .expect("the object has BTF");
    // Every enum `struct abi_enums` names, as clang compiled it.
    let anchor: types::Struct = btf.type_by_name("abi_enums").expect("struct abi_enums");
    let mut compiled: BTreeMap<String, Vec<(String, u32)>> = BTreeMap::new();
    for m in anchor.iter() {
        let ty = btf.type_by_id::<BtfType>(m.ty).expect("member type");
        let e = types::Enum::try_from(ty).expect("every member of abi_enums is an enum");
        let name = e
            .name()
            .expect("a named enum")
            .to_string_lossy()
            .into_owned();
        let members = e
            .iter()
            .map(|v| {
                let n = v.name.expect("member name").to_string_lossy().into_owned();
                (n, v.value as u32)
            })
            .collect();
        compiled.insert(name, members);
    }
    let generated: BTreeMap<String, Vec<(String, u32)>> = upf::abi::ENUMS
        .iter()
        .map(|(name, members)| {
            let m = members.iter().map(|(n, v)| (n.to_string(), *v)).collect();
            (name.to_string(), m)
        })
        .collect();
    assert_eq!(
        generated, compiled,
        "upf::abi (left) and the object's BTF (right) disagree: rebuild, and check \
         bpf/include/abi.h keeps to the grammar its first comment gives"
    );
    // The names operators see are the C names.
    for r in upf::abi::DropReason::ALL {
        let c = format!("DROP_{}", r.name().to_uppercase());
        assert!(
            compiled["drop_reason"].contains(&(c.clone(), r.index() as u32)),
            "{c}"
        );
    }
    for s in upf::abi::Stat::ALL {
        let c = format!("STAT_{}", s.name().to_uppercase());
        assert!(
            compiled["stat_index"].contains(&(c.clone(), s.index() as u32)),
            "{c}"
        );
    }
}
