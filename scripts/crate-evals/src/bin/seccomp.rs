//! Can `seccompiler` express the sandbox's seccomp policy (crates/sandbox/src/seccomp.rs)?
//! Builds the closest filter it allows and runs it through a classic-BPF interpreter like the
//! one in that module's test, beside what that test asserts of the hand-written filter.
//! x86_64 only (the policy lists three x86-only syscalls, and x32 is an x86_64 ABI).
use seccompiler::*;
use std::collections::BTreeMap;

/// The hand-written filter's `EPERM` list.
const DENIED: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_setns,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_quotactl_fd,
    libc::SYS_open_by_handle_at,
    libc::SYS_lookup_dcookie,
    libc::SYS_syslog,
    libc::SYS_uselib,
    libc::SYS_iopl,
    libc::SYS_ioperm,
];
/// Namespace flags `clone` must not carry (`unshare` adds `CLONE_NEWTIME`).
const NS: &[i32] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

/// Rules matching when any of `bits` is set in the first argument (one masked comparison a
/// rule: the rules of a syscall are alternatives).
fn any_bit(bits: &[i32]) -> Vec<SeccompRule> {
    bits.iter()
        .map(|b| {
            SeccompRule::new(vec![
                SeccompCondition::new(
                    0,
                    SeccompCmpArgLen::Qword,
                    SeccompCmpOp::MaskedEq(*b as u64),
                    *b as u64,
                )
                .unwrap(),
            ])
            .unwrap()
        })
        .collect()
}

/// What the program answers for one syscall, as the kernel would run it.
fn run(p: &[sock_filter], arch: u32, nr: i64, arg0: u64) -> u32 {
    let mut data = Vec::new();
    data.extend((nr as i32).to_ne_bytes());
    data.extend(arch.to_ne_bytes());
    data.extend(0u64.to_ne_bytes());
    data.extend(arg0.to_ne_bytes());
    data.extend([0u8; 40]);
    let (mut acc, mut pc) = (0u32, 0usize);
    loop {
        let i = &p[pc];
        pc += 1;
        let (code, jt, jf, k) = (i.code, i.jt, i.jf, i.k);
        match code {
            0x20 => acc = u32::from_ne_bytes(data[k as usize..k as usize + 4].try_into().unwrap()),
            0x54 => acc &= k,
            0x05 => pc += k as usize,
            0x15 | 0x25 | 0x35 | 0x45 => {
                let hit = match code {
                    0x15 => acc == k,
                    0x25 => acc > k,
                    0x35 => acc >= k,
                    _ => acc & k != 0,
                };
                pc += usize::from(if hit { jt } else { jf });
            }
            0x06 => return k,
            o => panic!("opcode {o:#x}"),
        }
    }
}

fn main() {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = DENIED.iter().map(|n| (*n, vec![])).collect();
    rules.insert(libc::SYS_clone, any_bit(NS));
    let mut uns = NS.to_vec();
    uns.push(libc::CLONE_NEWTIME);
    rules.insert(libc::SYS_unshare, any_bit(&uns));
    // clone3 must fail with ENOSYS (glibc then falls back to clone); one filter has one match
    // action, EPERM here, so the closest is EPERM.
    rules.insert(libc::SYS_clone3, vec![]);
    let f = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        TargetArch::x86_64,
    )
    .unwrap();
    let p: BpfProgram = f.try_into().unwrap();
    println!(
        "instructions: {} (the hand-written filter: 55 on x86_64)",
        p.len()
    );
    let arch = 0xC000_003E;
    let name = |k: u32| match k {
        0x7fff_0000 => "ALLOW".to_string(),
        0x8000_0000 => "KILL_PROCESS".into(),
        k if k & 0xffff_0000 == 0x0005_0000 => format!("ERRNO({})", k & 0xffff),
        k => format!("{k:#x}"),
    };
    let fork = (libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID | libc::SIGCHLD) as u64;
    // The last column is what crates/sandbox/src/seccomp.rs's test asserts of ours.
    let cases: &[(&str, u32, i64, u64, &str)] = &[
        ("ptrace", arch, libc::SYS_ptrace, 0, "ERRNO(1)"),
        ("read", arch, libc::SYS_read, 0, "ALLOW"),
        ("clone (fork)", arch, libc::SYS_clone, fork, "ALLOW"),
        (
            "clone CLONE_NEWUSER",
            arch,
            libc::SYS_clone,
            fork | libc::CLONE_NEWUSER as u64,
            "ERRNO(1)",
        ),
        (
            "unshare CLONE_NEWTIME",
            arch,
            libc::SYS_unshare,
            libc::CLONE_NEWTIME as u64,
            "ERRNO(1)",
        ),
        (
            "unshare CLONE_FILES",
            arch,
            libc::SYS_unshare,
            libc::CLONE_FILES as u64,
            "ALLOW",
        ),
        ("clone3", arch, libc::SYS_clone3, 0, "ERRNO(38)"),
        (
            "i386 read (other arch)",
            0x4000_0003,
            libc::SYS_read,
            0,
            "ERRNO(38)",
        ),
        (
            "x32 ptrace (nr 521|0x40000000)",
            arch,
            0x4000_0000 + 521,
            0,
            "ERRNO(38)",
        ),
        ("x32 read", arch, 0x4000_0000, 0, "ERRNO(38)"),
    ];
    for (what, a, nr, arg, want) in cases {
        let got = name(run(&p, *a, *nr, *arg));
        println!(
            "{:<32} seccompiler: {:<13} hand-written: {:<10} {}",
            what,
            got,
            want,
            if got == *want { "same" } else { "DIFFERENT" }
        );
    }
}
