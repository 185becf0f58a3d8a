//! The node file from the command line: `gtm node check`, and the one
//! reading `gtm serve --config` shares.

use std::path::Path;

use anyhow::Result;

use super::client::{CliError, default_node_file, read};
use crate::device::Device;
use gtm_model::node::NodeSettings;

/// Reads and parses a node file, as `gtm serve --config` does: an error
/// names the file (and the line and key when the parser gives them).
pub(super) fn load(path: &Path) -> Result<NodeSettings> {
    let text = read(&path.to_path_buf())?;
    NodeSettings::parse(&text)
        .map_err(|e| CliError::BadInput(format!("{}: {e}", path.display())).into())
}

/// `gtm node check [FILE]`: parses the node file and runs every check
/// `gtm serve` runs before it binds a socket; each problem on its own line.
pub(super) fn check(file: Option<&Path>) -> Result<()> {
    let file = file.map_or_else(default_node_file, Path::to_path_buf);
    let settings = load(&file)?;
    let problems = Device::check(&settings);
    if problems.is_empty() {
        println!("node file {}: ok", file.display());
        return Ok(());
    }
    let lines: Vec<String> = problems
        .iter()
        .map(|p| format!("{}: {p}", file.display()))
        .collect();
    Err(CliError::BadInput(lines.join("\n")).into())
}
