//! The `ct` records of the report fixtures (system `x86_1`): ML-KEM with its rejection
//! sampling declared benign and SHAKE's division in the provided primitives, qube-128 with a
//! branch the compiler introduced and two divisions in dec's reach. Part of `tests/report.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ngcc_pipe::ct::latency::{Indirect, Latency, LatencyClass, LatencyScan, VarLatency};
use ngcc_pipe::ct::Finding;
use ngcc_pipe::model::{Op, StepKind};
use ngcc_pipe::record::ct::CtData;
use ngcc_pipe::record::{Status, StepData};

use super::{base_record, push, Ctx};

fn finding(function: &str, file: &str, line: u32, kind: &str, source: &str) -> Finding {
    Finding {
        kinds: vec![kind.into()],
        function: function.into(),
        file: format!("/fixture/src/{file}"),
        line,
        count: 12,
        contexts: 1,
        stack: vec![format!("{function} ({file}:{line})")],
        benign: None,
        source: Some(source.into()),
        compiler: false,
    }
}

/// A variable-latency instruction of the fixture's objects.
fn division(function: &str, file: &str, line: u32, address: u64, path: &[&str]) -> VarLatency {
    VarLatency {
        class: LatencyClass::IntegerDivision,
        mnemonic: "div".into(),
        text: "div r10d".into(),
        function: function.into(),
        address,
        file: Some(format!("/fixture/src/{file}")),
        line: Some(line),
        inlined: vec![],
        unit: Some(format!("/fixture/src/{file}")),
        provided: file.starts_with("common/"),
        path: path.iter().map(|p| p.to_string()).collect(),
        context: vec![
            format!("   {:#x}  movzx eax,word ptr [rsi]", address - 6),
            format!("   {:#x}  lea eax,[rax+rax+681h]", address - 3),
            format!("=> {address:#x}  div r10d"),
            format!("   {:#x}  and eax,1", address + 3),
        ],
        secret: None,
        benign: None,
    }
}

/// `ct` records: ML-KEM's rejection sampling declared benign, nothing variable-latency in its
/// own code and SHAKE's length division in the provided primitives; qube-128 with a branch
/// the compiler introduced and divisions in dec's reach; qube-192 and qube-256 unchecked.
pub(crate) fn ct_records(ctx: &mut Ctx) {
    let flags: Vec<String> = ["-O3", "-march=native", "-g"].map(String::from).to_vec();
    let mut add = |sub: &str, id: &str, op: Op, findings: Vec<Finding>, scan: LatencyScan| {
        let data = CtData {
            runs: 2,
            marked: "the random bytes; sk before dec".into(),
            object: PathBuf::from(format!("build/{sub}/{id}/valgrind/{id}.so")),
            flags: flags.clone(),
            valgrind: "valgrind-3.19.0".into(),
            raw_log: PathBuf::from(format!("logs/{sub}/{id}/ct__{op}.memcheck.xml")),
            verdict: ngcc_pipe::ct::verdict(&findings),
            findings,
            other_errors: BTreeMap::new(),
            outside_object: 0,
            latency: Some(Latency::Scanned(scan)),
        };
        let r = base_record(
            false,
            StepKind::Ct,
            sub,
            Some(id),
            Some(op),
            Status::Ok,
            None,
            Some(StepData::Ct(data)),
        );
        push(ctx, r);
    };
    let scan = |root: String, instructions: Vec<VarLatency>| LatencyScan {
        isa: "x86-64".into(),
        root,
        functions: 40,
        instructions,
        outside: vec!["memcpy".into(), "memset".into()],
        indirect: vec![Indirect {
            function: "PQCLEAN_randombytes".into(),
            calls: 0,
            jumps: 1,
        }],
        address_taken: vec![],
        line_info: true,
    };
    let api = |ns: &str, op: Op| {
        let f = if op == Op::Keygen {
            "keypair"
        } else {
            op.name()
        };
        format!("{ns}crypto_kem_{f}")
    };
    for level in [512, 768, 1024] {
        let id = format!("ML-KEM-{level}-clean");
        let ns = format!("PQCLEAN_MLKEM{level}_CLEAN_");
        for op in Op::ALL {
            let findings = if op == Op::Enc {
                vec![]
            } else {
                let mut f = vec![finding(
                    "rej_uniform",
                    "indcpa.c",
                    128,
                    "UninitCondition",
                    "while (ctr < len && pos + 3 <= buflen) {",
                )];
                f[0].benign = Some("rejection sampling on the public seed rho".into());
                f
            };
            let root = api(&ns, op);
            let shake = division(
                "shake256",
                "common/fips202.c",
                728,
                0x320f,
                &[&root, "shake256"],
            );
            add("ml-kem", &id, op, findings, scan(root, vec![shake]));
        }
    }
    let ns = "QUBE128_";
    for op in Op::ALL {
        let root = api(ns, op);
        let mut findings = Vec::new();
        let mut divisions = Vec::new();
        if op == Op::Dec {
            let mut f = finding(
                "QUBE128_mask",
                "qube.c",
                40,
                "UninitCondition",
                "for (size_t i = 0; i < 64; ++i) {",
            );
            f.compiler = true;
            findings.push(f);
            divisions.push(division(
                "QUBE128_decode",
                "qube.c",
                88,
                0x1d1e,
                &[&root, "QUBE128_decode"],
            ));
            let mut secret = division(
                "QUBE128_mask",
                "qube.c",
                41,
                0x1c40,
                &[&root, "QUBE128_mask"],
            );
            secret.secret = Some(
                "memcheck saw secret data in `QUBE128_mask` (UninitCondition at qube.c:40)".into(),
            );
            divisions.push(secret);
        }
        add("qube", "qube-128", op, findings, scan(root, divisions));
    }
}
