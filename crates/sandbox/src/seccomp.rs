//! The seccomp filter of sandboxed commands: kernel interfaces a sandbox has no use for, and
//! that widen what a kernel bug could give it, fail with `EPERM` — tracing other processes,
//! kernel keyrings, BPF, perf events, userfaultfd, io_uring, modules, kexec, every mount call,
//! joining or creating namespaces, swap, reboot, accounting and quotas. `clone3` fails with
//! `ENOSYS` (its flags live in memory a filter cannot read), so libc falls back to `clone`,
//! whose flags are checked. Syscalls of another ABI (i386 or x32 on x86_64) fail too: their
//! numbers differ and would slip past the list.
//!
//! A classic BPF program, written by hand: it is a list of comparisons, and the tests below
//! run it through an interpreter. bubblewrap loads it (`--seccomp FD`) right before it starts
//! the command, after its own namespace setup.
//!
//! ## Hand-written, and why
//!
//! `seccompiler` (rust-vmm, Firecracker's) was evaluated as its compiler and not taken: it
//! cannot express this policy. Its filters have one action for a match and one for the rest,
//! so `clone3` cannot fail with `ENOSYS` while the list fails with `EPERM`; it kills the
//! process on a foreign architecture where this filter answers `ENOSYS`; and it has no range
//! test on the syscall number, so x32 syscalls (number | `0x4000_0000`, same `AUDIT_ARCH`)
//! reach its default action — allow, for a deny list. Its argument tests (one masked
//! comparison a rule) would have covered the namespace flags. BENCHMARKS.md ("Crates against
//! hand-written code") has the comparison.

/// The `AUDIT_ARCH_*` value of this build's syscall ABI, where the filter knows it.
#[cfg(target_arch = "x86_64")]
const ARCH: Option<u32> = Some(0xC000_003E);
#[cfg(target_arch = "aarch64")]
const ARCH: Option<u32> = Some(0xC000_00B7);
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const ARCH: Option<u32> = None;

/// x32 syscalls on x86_64 are numbered from here.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: Option<u32> = Some(0x4000_0000);
#[cfg(not(target_arch = "x86_64"))]
const X32_SYSCALL_BIT: Option<u32> = None;

/// Syscalls that fail with `EPERM`.
const DENIED: &[libc::c_long] = &[
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
    #[cfg(target_arch = "x86_64")]
    libc::SYS_uselib,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// Namespace flags `clone` must not carry (`CLONE_NEWTIME` shares its bit with the exit
/// signal there, so only `unshare` checks it).
const CLONE_NAMESPACES: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32;
const UNSHARE_NAMESPACES: u32 = CLONE_NAMESPACES | libc::CLONE_NEWTIME as u32;

// Classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
// Offsets in struct seccomp_data; both supported architectures are little-endian, so an
// argument's low 32 bits come first.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const OFFSET_ARG0: u32 = 16;

/// Where a conditional jump goes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum To {
    Next,
    Allow,
    Eperm,
    Enosys,
    CloneFlags,
    UnshareFlags,
}

/// One instruction before jump targets are resolved.
#[derive(Clone, Copy, Debug)]
struct Insn {
    code: u16,
    jt: To,
    jf: To,
    k: u32,
}

fn ld(offset: u32) -> Insn {
    Insn {
        code: LD_W_ABS,
        jt: To::Next,
        jf: To::Next,
        k: offset,
    }
}

fn jump(code: u16, k: u32, jt: To, jf: To) -> Insn {
    Insn { code, jt, jf, k }
}

fn ret(k: u32) -> Insn {
    Insn {
        code: RET_K,
        jt: To::Next,
        jf: To::Next,
        k,
    }
}

/// The filter as `struct sock_filter` records (code u16, jt u8, jf u8, k u32, native
/// endianness), as bubblewrap reads it; None where this architecture is not supported.
pub fn program() -> Option<Vec<u8>> {
    let arch = ARCH?;
    let mut body = vec![
        ld(OFFSET_ARCH),
        jump(JEQ_K, arch, To::Next, To::Enosys),
        ld(OFFSET_NR),
    ];
    if let Some(bit) = X32_SYSCALL_BIT {
        body.push(jump(JGE_K, bit, To::Enosys, To::Next));
    }
    for nr in DENIED {
        body.push(jump(JEQ_K, *nr as u32, To::Eperm, To::Next));
    }
    body.push(jump(JEQ_K, libc::SYS_clone3 as u32, To::Enosys, To::Next));
    body.push(jump(
        JEQ_K,
        libc::SYS_clone as u32,
        To::CloneFlags,
        To::Next,
    ));
    body.push(jump(
        JEQ_K,
        libc::SYS_unshare as u32,
        To::UnshareFlags,
        To::Next,
    ));
    body.push(ret(RET_ALLOW));
    let labels = [
        (
            To::CloneFlags,
            vec![
                ld(OFFSET_ARG0),
                jump(JSET_K, CLONE_NAMESPACES, To::Eperm, To::Allow),
            ],
        ),
        (
            To::UnshareFlags,
            vec![
                ld(OFFSET_ARG0),
                jump(JSET_K, UNSHARE_NAMESPACES, To::Eperm, To::Allow),
            ],
        ),
        (To::Allow, vec![ret(RET_ALLOW)]),
        (To::Eperm, vec![ret(RET_ERRNO | libc::EPERM as u32)]),
        (To::Enosys, vec![ret(RET_ERRNO | libc::ENOSYS as u32)]),
    ];
    let mut at = Vec::new();
    for (label, block) in labels {
        at.push((label, body.len()));
        body.extend(block);
    }
    let target = |from: usize, to: To| -> u8 {
        if to == To::Next {
            return 0;
        }
        let (_, pos) = at.iter().find(|(l, _)| *l == to).expect("label");
        u8::try_from(pos - from - 1).expect("seccomp jump within 255 instructions")
    };
    let mut out = Vec::with_capacity(body.len() * 8);
    for (i, insn) in body.iter().enumerate() {
        out.extend(insn.code.to_ne_bytes());
        out.push(target(i, insn.jt));
        out.push(target(i, insn.jf));
        out.extend(insn.k.to_ne_bytes());
    }
    Some(out)
}

/// Writes the filter to `path` (replaced atomically: replicas sharing a data directory rewrite
/// it at start-up); false where this architecture has none.
pub fn write(path: &std::path::Path) -> std::io::Result<bool> {
    let Some(bytes) = program() else {
        return Ok(false);
    };
    let tmp = path.with_extension(format!("tmp{}", mast_domain::ids::new_secret(8)));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(true)
}

/// The architecture name the filter covers, for the start-up report.
pub fn arch() -> Option<&'static str> {
    ARCH.map(|_| std::env::consts::ARCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the program the way the kernel would, for one syscall.
    fn run(program: &[u8], arch: u32, nr: i64, arg0: u64) -> u32 {
        let insns: Vec<(u16, u8, u8, u32)> = program
            .chunks(8)
            .map(|c| {
                (
                    u16::from_ne_bytes([c[0], c[1]]),
                    c[2],
                    c[3],
                    u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
                )
            })
            .collect();
        let mut data = Vec::new();
        data.extend((nr as i32).to_ne_bytes());
        data.extend(arch.to_ne_bytes());
        data.extend(0u64.to_ne_bytes());
        data.extend(arg0.to_ne_bytes());
        let mut acc = 0u32;
        let mut pc = 0usize;
        loop {
            let (code, jt, jf, k) = insns[pc];
            pc += 1;
            match code {
                LD_W_ABS => {
                    let k = k as usize;
                    acc = u32::from_ne_bytes(data[k..k + 4].try_into().unwrap());
                }
                JEQ_K | JGE_K | JSET_K => {
                    let hit = match code {
                        JEQ_K => acc == k,
                        JGE_K => acc >= k,
                        _ => acc & k != 0,
                    };
                    pc += usize::from(if hit { jt } else { jf });
                }
                RET_K => return k,
                other => panic!("unexpected opcode {other:#x}"),
            }
        }
    }

    #[test]
    fn denies_what_it_lists_and_allows_ordinary_work() {
        let Some(p) = program() else {
            crate::test_env::cannot_run_here("no seccomp filter for this architecture");
            return;
        };
        assert_eq!(p.len() % 8, 0);
        let arch = ARCH.unwrap();
        let eperm = RET_ERRNO | libc::EPERM as u32;
        let enosys = RET_ERRNO | libc::ENOSYS as u32;
        for nr in DENIED {
            assert_eq!(run(&p, arch, *nr, 0), eperm, "syscall {nr}");
        }
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_openat,
            libc::SYS_execve,
            libc::SYS_wait4,
            libc::SYS_mmap,
            libc::SYS_futex,
        ] {
            assert_eq!(run(&p, arch, nr, 0), RET_ALLOW, "syscall {nr}");
        }
        // Threads and processes, but no namespaces.
        let thread = (libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_FILES
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD
            | libc::CLONE_SYSVSEM
            | libc::CLONE_SETTLS
            | libc::CLONE_PARENT_SETTID
            | libc::CLONE_CHILD_CLEARTID) as u64;
        assert_eq!(run(&p, arch, libc::SYS_clone, thread), RET_ALLOW);
        let fork = (libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID | libc::SIGCHLD) as u64;
        assert_eq!(run(&p, arch, libc::SYS_clone, fork), RET_ALLOW);
        for ns in [
            libc::CLONE_NEWUSER,
            libc::CLONE_NEWNS,
            libc::CLONE_NEWPID,
            libc::CLONE_NEWNET,
        ] {
            assert_eq!(
                run(&p, arch, libc::SYS_clone, fork | ns as u64),
                eperm,
                "{ns:#x}"
            );
            assert_eq!(run(&p, arch, libc::SYS_unshare, ns as u64), eperm);
        }
        assert_eq!(
            run(&p, arch, libc::SYS_unshare, libc::CLONE_NEWTIME as u64),
            eperm
        );
        assert_eq!(
            run(&p, arch, libc::SYS_unshare, libc::CLONE_FILES as u64),
            RET_ALLOW
        );
        assert_eq!(run(&p, arch, libc::SYS_clone3, 0), enosys);
        // Another ABI's numbers mean other syscalls.
        assert_eq!(run(&p, 0x4000_0003, libc::SYS_read, 0), enosys);
        if let Some(bit) = X32_SYSCALL_BIT {
            assert_eq!(run(&p, arch, i64::from(bit) + 101, 0), enosys);
        }
    }
}
