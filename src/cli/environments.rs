//! `mast environments warm ID`: builds an environment's package layer ahead of its first
//! session, in the server's data directory, so that session's first tool call does not wait.

use anyhow::Context as _;

use super::StoreArgs;
use crate::domain::environment::EnvironmentConfig;
use crate::tools::egress::EgressPolicy;
use crate::tools::{Toolbox, packages};

/// Builds (or finds) the package layer of environment `id` and prints its directory.
pub async fn warm(store: &StoreArgs, workspace: &str, id: &str) -> anyhow::Result<()> {
    let opened = store.open_existing().await?;
    let env = opened
        .store
        .get_environment(workspace, id)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("reading {} from {}", id, opened.place))?
        .ok_or_else(|| anyhow::anyhow!("there is no environment {id} in workspace {workspace}"))?;
    let EnvironmentConfig::Cloud {
        packages: wanted, ..
    } = &env.config
    else {
        anyhow::bail!("{id} is a self-hosted environment: its workers install their own packages");
    };
    if !packages::wanted(wanted) {
        eprintln!("{id} lists no packages: there is nothing to build");
        return Ok(());
    }
    let config = store.config().with_env_tuning()?;
    let toolbox = Toolbox::new(&config.data_dir, config.tools.clone()).await;
    let layers = toolbox.layers();
    eprintln!(
        "building the package layer {} of {id} (or finding it built)…",
        layers.key(wanted)
    );
    let dir = layers
        .ensure(wanted, &EgressPolicy::of(&env.config))
        .await
        .map_err(|why| anyhow::anyhow!(why))?;
    println!("{}", dir.display());
    Ok(())
}
