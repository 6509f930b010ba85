//! For tests that need something a machine may lack (root, writable cgroups, a network
//! namespace, PostgreSQL's binaries): such a test says why it did not run, and fails instead
//! when the run requires every test (`MAST_REQUIRE_ALL_TESTS=1`, which CI sets), so a test
//! that silently stopped running on the CI machine cannot pass unnoticed. It lives here, with
//! the tests that need it most (sandbox users, cgroups, seccomp), so the domain reads no
//! environment; the server's integration tests reach it as `mast::tools::test_env`.

/// The variable that makes a test that cannot run fail instead of passing.
pub const REQUIRE_ALL_TESTS: &str = "MAST_REQUIRE_ALL_TESTS";

/// Reports that the calling test cannot run here because of `why`: a failure when every
/// test is required, else a `SKIPPED` line. The caller returns right after.
pub fn cannot_run_here(why: &str) {
    assert!(
        std::env::var_os(REQUIRE_ALL_TESTS).is_none_or(|v| v.is_empty() || v == "0"),
        "{REQUIRE_ALL_TESTS} is set and this test cannot run here: {why}"
    );
    eprintln!("SKIPPED: {why}");
}
