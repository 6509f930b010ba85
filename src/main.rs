//! The `mast` binary: parses the command line, sets up logging, and calls into the library.

use clap::Parser;
use std::process::ExitCode;

use mast::cli::{
    AgentsCommand, Cli, Command, EnvironmentsCommand, HooksCommand, KeysCommand, SessionsCommand,
    SkillsCommand, WebhooksCommand,
};
use tracing_subscriber::EnvFilter;

/// Logging from `MAST_LOG` (a filter such as `info` or `warn,mast=debug`) and
/// `MAST_LOG_FORMAT` (`text` or `json`); a value that cannot be understood is an error rather
/// than a silent default, so a typo never hides the logs someone asked for.
fn init_logging() -> anyhow::Result<()> {
    let filter = match std::env::var("MAST_LOG") {
        Ok(v) if !v.trim().is_empty() => mast::logging::check_filter(&v)
            .map_err(|e| e.to_string())
            .and_then(|()| EnvFilter::try_new(&v).map_err(|e| e.to_string()))
            .map_err(|e| {
                anyhow::anyhow!(
                    "MAST_LOG={v:?} is not a log filter ({e}); try `info`, `debug` or `warn,mast=debug`"
                )
            })?,
        _ => EnvFilter::new("info,sqlx=warn"),
    };
    let json = match std::env::var("MAST_LOG_FORMAT").as_deref() {
        Ok("json") => true,
        Ok("text") | Ok("") | Err(_) => false,
        Ok(other) => anyhow::bail!("MAST_LOG_FORMAT={other:?} must be `text` or `json`"),
    };
    use std::io::IsTerminal as _;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
    Ok(())
}

/// Why `mast serve` cannot listen, with what to do about it.
fn listen_error(addr: std::net::SocketAddr, e: std::io::Error) -> anyhow::Error {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => anyhow::anyhow!(
            "cannot listen on {addr}: the address is already in use (is another server running there?); pick another with --listen or MAST_LISTEN"
        ),
        std::io::ErrorKind::PermissionDenied => anyhow::anyhow!(
            "cannot listen on {addr}: permission denied (ports below 1024 need privileges); pick another with --listen"
        ),
        _ => anyhow::anyhow!("cannot listen on {addr}: {e}"),
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("signal handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// jemalloc rather than the system allocator: under sustained load glibc's arenas kept the
/// memory a busy server freed, its RSS about twice its live heap, where jemalloc returns it
/// (BENCHMARKS.md, the soak scenario).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The in-sandbox proxy forwarder runs on one thread: every thread counts against the
    // session's process limit, and a runtime per core would spend it on a many-core host.
    let runtime = match cli.command {
        Command::SandboxForward { .. } => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    }
    .enable_all()
    .build();
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            // The whole chain on one line: what failed, and why.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve {
            listen,
            store,
            allow_unauthenticated,
            config: config_file,
        } => {
            init_logging()?;
            // Every stream, proxy connection and sandbox pipe is a descriptor; the default
            // soft limit (often 1024) would let one busy session starve the listener.
            match rlimit::increase_nofile_limit(u64::MAX) {
                Ok(n) => tracing::debug!(limit = n, "open-file limit raised"),
                Err(e) => tracing::warn!(error = %e, "could not raise the open-file limit"),
            }
            let mut config = store.config();
            config.listen = listen;
            config.allow_unauthenticated =
                allow_unauthenticated || mast::config::flag("MAST_ALLOW_UNAUTHENTICATED")?;
            config.bootstrap_api_key = std::env::var("MAST_BOOTSTRAP_API_KEY")
                .ok()
                .filter(|k| !k.is_empty());
            let file = config_file.or_else(|| {
                let default = std::path::PathBuf::from("mast.toml");
                default.exists().then_some(default)
            });
            let providers_env = std::env::var("MAST_PROVIDERS").ok();
            config.providers =
                mast::models::registry::load_providers(providers_env.as_deref(), file.as_deref())?;
            config.provider_sources = mast::models::registry::ProviderSources {
                env: providers_env.is_some_and(|j| !j.trim().is_empty()),
                // Absolute, so a message read elsewhere (an API client's) names the file.
                file: file
                    .as_deref()
                    .map(|f| std::path::absolute(f).unwrap_or(f.to_path_buf())),
            };
            let prices_env = std::env::var("MAST_PRICES").ok();
            config.engine.prices =
                mast::config::load_prices(prices_env.as_deref(), file.as_deref())?;
            // Hooks.
            config.hooks = mast::config::load_hooks(file.as_deref())?;
            config.webhook_endpoints = mast::config::load_webhooks(file.as_deref())?;
            config.engine.outcomes = mast::engine::outcomes::OutcomeConfig::load(file.as_deref())?;
            let config = config.with_env_tuning()?;
            let listener = tokio::net::TcpListener::bind(config.listen)
                .await
                .map_err(|e| listen_error(config.listen, e))?;
            let running = mast::start(config, listener).await?;
            running.announce();
            shutdown_signal().await;
            tracing::info!("shutting down");
            running.stop().await;
        }
        Command::Migrate { store } => {
            init_logging()?;
            let opened = store.open().await?;
            eprintln!("migrations are up to date in {}", opened.place);
            opened.warn_if_created();
        }
        Command::Keys { command } => {
            return match command {
                KeysCommand::Create {
                    workspace,
                    environment,
                    store,
                } => mast::cli::keys::create(&store, &workspace, environment.as_deref()).await,
                KeysCommand::List { json, store } => mast::cli::keys::list(&store, json).await,
                KeysCommand::Revoke { id, store } => mast::cli::keys::revoke(&store, &id).await,
            };
        }
        Command::Environments {
            command:
                EnvironmentsCommand::Warm {
                    id,
                    workspace,
                    store,
                },
        } => {
            init_logging()?;
            mast::cli::environments::warm(&store, &workspace, &id).await?;
        }
        Command::Skills {
            command:
                SkillsCommand::InstallAnthropic {
                    dir,
                    id,
                    workspace,
                    store,
                },
        } => mast::cli::skills::install_anthropic(&store, &workspace, &dir, id.as_deref()).await?,
        Command::Agents {
            command: AgentsCommand::Apply { file, server },
        } => return mast::cli::agents::apply(&server, &file).await,
        Command::Agents {
            command:
                AgentsCommand::List {
                    limit,
                    json,
                    server,
                },
        } => mast::cli::agents::list(&server, limit, json).await?,
        Command::Sessions {
            command: SessionsCommand::Create { args, server },
        } => mast::cli::session_create::create(&server, &args).await?,
        Command::Sessions {
            command: SessionsCommand::List { args, server },
        } => mast::cli::session_list::list(&server, &args).await?,
        Command::Sessions {
            command: SessionsCommand::Answer { args, server },
        } => return mast::cli::answer::answer(&server, &args).await,
        Command::Sessions {
            command:
                SessionsCommand::Tail {
                    session_id,
                    from_start,
                    json,
                    server,
                },
        } => return mast::cli::sessions::tail(&server, &session_id, from_start, json).await,
        Command::Send {
            session_id,
            text,
            wait,
            json,
            server,
        } => return mast::cli::sessions::send(&server, &session_id, &text, wait, json).await,
        Command::Doctor {
            listen,
            store,
            config,
        } => {
            let setup = mast::cli::doctor::Setup::new(listen, store, config);
            return Ok(mast::cli::doctor::doctor(&setup).await);
        }
        Command::Hooks { command } => match command {
            HooksCommand::Create { args, server } => {
                mast::cli::hooks::create(&server, &args).await?
            }
            HooksCommand::List { server } => mast::cli::hooks::list(&server).await?,
            HooksCommand::Delete { id, server } => mast::cli::hooks::delete(&server, &id).await?,
        },
        Command::Webhooks { command } => {
            use mast::cli::webhooks as wh;
            match command {
                WebhooksCommand::Create { args, server } => wh::create(&server, &args).await?,
                WebhooksCommand::List { server } => wh::list(&server).await?,
                WebhooksCommand::Enable { id, server } => {
                    wh::set_enabled(&server, &id, true).await?
                }
                WebhooksCommand::Disable { id, server } => {
                    wh::set_enabled(&server, &id, false).await?
                }
                WebhooksCommand::RotateSecret { id, server } => {
                    wh::rotate_secret(&server, &id).await?
                }
                WebhooksCommand::Deliveries { id, server } => wh::deliveries(&server, &id).await?,
                WebhooksCommand::Replay {
                    endpoint,
                    delivery,
                    server,
                } => wh::replay(&server, &endpoint, &delivery).await?,
                WebhooksCommand::Delete { id, server } => wh::delete(&server, &id).await?,
            }
        }
        Command::Health { url } => return Ok(mast::cli::health::check(&url).await),
        Command::Completions { shell } => mast::cli::completions(shell, &mut std::io::stdout()),
        Command::Openapi => {
            use std::io::Write as _;
            let doc = mast::api::openapi::document();
            // `mast openapi | head` closes the pipe early; that is not an error.
            match std::io::stdout().lock().write_all(doc.as_bytes()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                other => other?,
            }
        }
        Command::SandboxForward { port, socket } => {
            mast::tools::proxy::forward(port, socket).await?
        }
    }
    Ok(ExitCode::SUCCESS)
}
