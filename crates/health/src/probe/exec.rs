//! Exec probe: an external command; exit 0 = OK. Only when the node's
//! settings allow it (checked by the caller).

use std::process::Stdio;

use super::{Host, ProbeResult, Target};

pub(crate) async fn probe(target: &Target, command: &[String]) -> ProbeResult {
    let Some((program, args)) = command.split_first() else {
        return Err("exec check has no command".to_string());
    };
    let target_text = match &target.host {
        Host::Ip(ip) => ip.to_string(),
        Host::Name(name) | Host::Resolved(name, _) => name.clone(),
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env("GTM_TARGET", &target_text)
        .env("GTM_PORT", target.port.to_string())
        .env("GTM_HOST", &target.server_name)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // The probe's timeout drops this future: the command dies with it.
        .kill_on_drop(true);
    let output = cmd
        .output()
        .await
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if output.status.success() {
        return Ok("exit 0".to_string());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let mut first_line = stderr
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string();
    if first_line.chars().count() > 200 {
        first_line = first_line.chars().take(200).collect::<String>() + "…";
    }
    let head = match output.status.code() {
        Some(code) => format!("exit status {code}"),
        None => {
            use std::os::unix::process::ExitStatusExt;
            match output.status.signal() {
                Some(sig) => format!("killed by signal {sig}"),
                None => format!("failed: {}", output.status),
            }
        }
    };
    if first_line.is_empty() {
        Err(head)
    } else {
        Err(format!("{head}: {first_line}"))
    }
}
