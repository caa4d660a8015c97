//! What docs/DEPLOYMENT.md tells an operator to run: its systemd units (deploy/*.service, and
//! the fragments the guide shows) parse as systemd reads them and set only variables svc reads,
//! the standby's unit is the indexer's, and a PostgreSQL password given apart from the URL
//! (a file, `PGPASSWORD`, `.pgpass`) reaches a database that asks for one.

use svc_testkit as common;

use common::*;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const DEPLOYMENT: &str = include_str!("../../../docs/DEPLOYMENT.md");
const README: &str = include_str!("../../../README.md");

/// The units the guide links, as deploy/ holds them.
const UNITS: [(&str, &str); 3] = [
    (
        "deploy/svc-indexer.service",
        include_str!("../../../deploy/svc-indexer.service"),
    ),
    (
        "deploy/svc-standby.service",
        include_str!("../../../deploy/svc-standby.service"),
    ),
    (
        "deploy/svc-replica@.service",
        include_str!("../../../deploy/svc-replica@.service"),
    ),
];

/// A unit file's text as a block, its lines numbered as in the file.
fn unit_block(text: &str) -> Block {
    Block {
        info: "ini".to_string(),
        lines: text
            .lines()
            .enumerate()
            .map(|(n, l)| (n + 1, l.to_string()))
            .collect(),
    }
}

/// Variables svc reads that are no flag's: `svc serve --help` does not list them.
const READ_OUTSIDE_FLAGS: [&str; 3] = ["SVC_LOG", "PGPASSWORD", "PGPASSFILE"];

/// The unit settings the guide uses. One outside the list is most likely misspelt (systemd
/// warns of an unknown key and carries on without it); add it here once checked.
const KNOWN_KEYS: [(&str, &[&str]); 3] = [
    ("Unit", &["Description", "Wants", "After", "Requires"]),
    (
        "Service",
        &[
            "User",
            "Group",
            "Environment",
            "EnvironmentFile",
            "LoadCredential",
            "ExecStart",
            "Restart",
            "RestartSec",
            "LimitNOFILE",
        ],
    ),
    ("Install", &["WantedBy"]),
];

/// A fenced block of a Markdown text: its info string (`ini`, `sh`) and its lines, with the
/// fence's own indentation (a block inside a list item) taken off, numbered as in the text.
struct Block {
    info: String,
    lines: Vec<(usize, String)>,
}

fn fenced_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, Block)> = None;
    for (n, line) in markdown.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim_start();
        match open.take() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let block = Block {
                        info: info.trim().to_string(),
                        lines: Vec::new(),
                    };
                    open = Some((indent, block));
                }
            }
            Some((_, block)) if trimmed == "```" => blocks.push(block),
            Some((fence, mut block)) => {
                let cut = indent.min(fence);
                block.lines.push((n + 1, line[cut..].to_string()));
                open = Some((fence, block));
            }
        }
    }
    assert!(open.is_none(), "an unclosed fenced block");
    blocks
}

/// One setting of a unit: its section, key, value, and the line it starts on.
#[derive(Debug)]
struct Setting {
    section: String,
    key: String,
    value: String,
    line: usize,
}

/// A unit file as systemd reads it (systemd.syntax(7)): `[Section]` lines, `Key=Value` lines
/// (spaces around `=` and at either end dropped; a `\` at the end of a line joins the next,
/// comment lines within skipped), and comments only on lines of their own, starting with `#`
/// or `;`. Any other line is an error, as is a setting before the first section.
fn parse_unit(lines: &[(usize, String)]) -> Result<Vec<Setting>, String> {
    let mut settings = Vec::new();
    let mut section: Option<String> = None;
    let mut pending: Option<(usize, String)> = None;
    for (n, raw) in lines {
        let line = raw.trim();
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let (start, text) = match pending.take() {
            Some((start, mut text)) => {
                text.push(' ');
                text.push_str(line);
                (start, text)
            }
            None => (*n, line.to_string()),
        };
        if let Some(joined) = text.strip_suffix('\\') {
            pending = Some((start, joined.to_string()));
            continue;
        }
        if text.is_empty() {
            continue;
        }
        if let Some(name) = text.strip_prefix('[') {
            let name = name
                .strip_suffix(']')
                .ok_or_else(|| format!("line {start}: {text:?} opens no section"))?;
            section = Some(name.to_string());
            continue;
        }
        let (key, value) = text
            .split_once('=')
            .ok_or_else(|| format!("line {start}: {text:?} is no section, setting or comment"))?;
        let key = key.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(format!("line {start}: {key:?} is not a key"));
        }
        let section = section
            .clone()
            .ok_or_else(|| format!("line {start}: {key}= before any section"))?;
        settings.push(Setting {
            section,
            key: key.to_string(),
            value: value.trim().to_string(),
            line: start,
        });
    }
    if let Some((start, _)) = pending {
        return Err(format!("line {start}: a continued line ends the unit"));
    }
    Ok(settings)
}

/// The assignments of an `Environment=` value: `NAME=value` words, separated by spaces,
/// each possibly quoted whole in `"` or `'`.
fn environment_assignments(value: &str) -> Result<Vec<(String, String)>, String> {
    let mut words = Vec::new();
    let mut chars = value.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(&first) = chars.peek() else { break };
        let mut word = String::new();
        if first == '"' || first == '\'' {
            chars.next();
            loop {
                match chars.next() {
                    Some(c) if c == first => break,
                    Some('\\') if first == '"' => word.extend(chars.next()),
                    Some(c) => word.push(c),
                    None => return Err(format!("{value:?}: an unclosed quote")),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                word.push(c);
            }
        }
        words.push(word);
    }
    words
        .into_iter()
        .map(|word| match word.split_once('=') {
            Some((name, value)) if is_variable_name(name) => {
                Ok((name.to_string(), value.to_string()))
            }
            _ => Err(format!("{word:?} is no NAME=value assignment")),
        })
        .collect()
}

fn is_variable_name(name: &str) -> bool {
    name.chars().next().is_some_and(|c| !c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The variables an environment file sets: `NAME=value` lines, comments on lines of their own.
fn environment_file_variables(lines: &[(usize, String)]) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    for (n, line) in lines {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let (name, _) = line
            .split_once('=')
            .ok_or_else(|| format!("line {n}: {line:?} is no NAME=value line"))?;
        let name = name.trim().trim_start_matches("export ").trim();
        if !is_variable_name(name) {
            return Err(format!("line {n}: {name:?} is not a variable name"));
        }
        names.push(name.to_string());
    }
    Ok(names)
}

/// Every variable svc reads: the flags' (from `svc serve --help`) and the few read elsewhere.
fn variables_svc_reads() -> BTreeSet<String> {
    let help = svc()
        .args(["serve", "--help"])
        .env_clear()
        .output()
        .expect("svc serve --help");
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout).to_string();
    let mut names: BTreeSet<String> = help
        .split("[env: ")
        .skip(1)
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect();
    assert!(names.contains("SVC_DB"), "{help}");
    names.extend(READ_OUTSIDE_FLAGS.iter().map(|n| n.to_string()));
    names
}

/// The variable column of README's configuration table.
fn readme_configuration_variables() -> BTreeSet<String> {
    let table = README
        .split("## Configuration")
        .nth(1)
        .expect("README has a Configuration section");
    table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|row| row.split('|').nth(2))
        .flat_map(|cell| cell.split('`').skip(1).step_by(2).map(str::to_string))
        .filter(|name| is_variable_name(name))
        .collect()
}

/// The file a block shows: its first line, a comment naming an absolute path.
fn block_path(block: &Block) -> Option<String> {
    let (_, first) = block.lines.first()?;
    let path = first.strip_prefix("# ")?.split_whitespace().next()?;
    let path = path.trim_end_matches(':');
    path.starts_with('/').then(|| path.to_string())
}

/// README's configuration table names every variable read outside the flags, and only
/// variables svc reads.
fn check_readme_configuration(reads: &BTreeSet<String>) {
    let documented = readme_configuration_variables();
    for name in READ_OUTSIDE_FLAGS {
        assert!(
            documented.contains(name),
            "README's configuration table does not name {name}"
        );
    }
    for name in &documented {
        assert!(
            reads.contains(name),
            "README's configuration table names {name}, which svc does not read"
        );
    }
}

/// Checks one setting of a unit from `source` as systemd and svc would read it; an
/// environment file it names goes into `environment_files`.
fn check_setting(
    source: &str,
    setting: &Setting,
    reads: &BTreeSet<String>,
    environment_files: &mut BTreeSet<String>,
) {
    let Setting {
        section,
        key,
        value,
        line,
    } = setting;
    let at = format!("{source} line {line}: {key}={value}");
    let known = KNOWN_KEYS
        .iter()
        .find(|(s, _)| s == section)
        .unwrap_or_else(|| panic!("{at}: a section [{section}] of no known use"));
    assert!(
        known.1.contains(&key.as_str()),
        "{at}: unknown in [{section}]"
    );
    // systemd takes `#` and `;` after a value as part of the value.
    assert!(
        !value.contains('#') && !value.contains(" ;") && !value.contains("\t;"),
        "{at}: a comment after a value is part of the value"
    );
    assert!(!value.is_empty(), "{at}: an empty value resets the setting");
    match key.as_str() {
        "Environment" => {
            let assignments =
                environment_assignments(value).unwrap_or_else(|e| panic!("{at}: {e}"));
            for (name, _) in assignments {
                assert!(reads.contains(&name), "{at}: svc does not read {name}");
            }
        }
        "EnvironmentFile" => {
            let path = value.strip_prefix('-').unwrap_or(value);
            assert!(
                path.starts_with('/') && !path.contains(char::is_whitespace),
                "{at}: not an absolute path alone"
            );
            environment_files.insert(path.to_string());
        }
        "LoadCredential" => {
            let (_, path) = value
                .split_once(':')
                .unwrap_or_else(|| panic!("{at}: not ID:PATH"));
            assert!(path.starts_with('/'), "{at}: not an absolute path");
        }
        "ExecStart" => {
            let words: Vec<&str> = value.split_whitespace().collect();
            assert!(words[0].starts_with('/'), "{at}: not an absolute path");
            assert_eq!(words.get(1), Some(&"serve"), "{at}");
        }
        _ => {}
    }
}

/// The units of deploy/, each linked from the guide.
fn unit_files() -> Vec<(&'static str, Block)> {
    let files: Vec<(&str, Block)> = UNITS
        .iter()
        .map(|(name, text)| (*name, unit_block(text)))
        .collect();
    for (name, _) in &files {
        let file = name.trim_start_matches("deploy/");
        assert!(
            DEPLOYMENT.contains(&format!("(../deploy/{file})")),
            "the guide does not link {name}"
        );
    }
    files
}

#[test]
fn the_systemd_units_of_the_deployment_guide_are_what_systemd_and_svc_read() {
    let reads = variables_svc_reads();
    check_readme_configuration(&reads);
    let blocks = fenced_blocks(DEPLOYMENT);
    let files = unit_files();
    let fragments = blocks.iter().filter(|b| b.info == "ini");
    let units: Vec<(&str, &Block)> = files
        .iter()
        .map(|(name, block)| (*name, block))
        .chain(fragments.map(|b| ("DEPLOYMENT.md", b)))
        .collect();
    let mut environment_files = BTreeSet::new();
    let mut whole_units = Vec::new();
    for (source, unit) in units {
        let settings = parse_unit(&unit.lines).unwrap_or_else(|e| panic!("{source}: {e}"));
        assert!(!settings.is_empty());
        for setting in &settings {
            check_setting(source, setting, &reads, &mut environment_files);
        }
        let has = |key: &str| settings.iter().any(|s| s.key == key);
        if has("ExecStart") {
            let path = block_path(unit).expect("a whole unit names its file on its first line");
            // After= orders, Wants= pulls in: network-online.target is reached only if
            // something wants it.
            assert!(
                !has("After") || has("Wants"),
                "{path}: After= without Wants="
            );
            whole_units.push((path, unit));
        }
    }
    assert_eq!(whole_units.len(), UNITS.len(), "every file a whole unit");
    assert_eq!(
        settings_but_description(&files[0].1),
        settings_but_description(&files[1].1),
        "the standby's unit is the indexer's"
    );
    // Each environment file the units read is shown, and sets only what svc reads.
    for path in &environment_files {
        let shown = blocks
            .iter()
            .find(|b| b.info != "ini" && block_path(b).as_deref() == Some(path))
            .unwrap_or_else(|| panic!("DEPLOYMENT.md does not show {path}"));
        let names = environment_file_variables(&shown.lines)
            .unwrap_or_else(|e| panic!("DEPLOYMENT.md's {path}: {e}"));
        assert!(!names.is_empty(), "{path} sets nothing");
        for name in names {
            assert!(reads.contains(&name), "{path}: svc does not read {name}");
        }
    }
    verify_with_systemd(&whole_units);
}

/// A unit's settings but its Description=, in order.
fn settings_but_description(unit: &Block) -> Vec<(String, String)> {
    parse_unit(&unit.lines)
        .expect("a unit")
        .into_iter()
        .filter(|s| s.key != "Description")
        .map(|s| (s.key, s.value))
        .collect()
}

/// `systemd-analyze verify` on the whole units, with ExecStart= pointed at the built binary
/// (it checks that the program exists). Without systemd-analyze, the parser above is the
/// check.
fn verify_with_systemd(units: &[(String, &Block)]) {
    let available = std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !available {
        eprintln!("systemd-analyze is not installed: the units were checked by the parser alone");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (path, unit) in units {
        let name = Path::new(path).file_name().unwrap().to_string_lossy();
        // A template is verified as an instance of it.
        let name = name.replace("@.", "@8788.");
        let text: String = unit
            .lines
            .iter()
            .map(|(_, l)| l.replace("/usr/local/bin/svc", env!("CARGO_BIN_EXE_svc")) + "\n")
            .collect();
        let file = dir.path().join(&name);
        std::fs::write(&file, text).unwrap();
        files.push(file);
    }
    let output = std::process::Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&files)
        .output()
        .expect("systemd-analyze verify");
    let said = String::from_utf8_lossy(&output.stderr).to_string()
        + &String::from_utf8_lossy(&output.stdout);
    let about_ours: Vec<&str> = said
        .lines()
        .filter(|l| {
            files
                .iter()
                .any(|f| l.contains(&*f.file_name().unwrap().to_string_lossy()))
        })
        .collect();
    assert!(
        output.status.success() && about_ours.is_empty(),
        "systemd-analyze verify: {said}"
    );
}

#[test]
fn the_unit_parser_reads_as_systemd_does() {
    let lines = |text: &str| -> Vec<(usize, String)> {
        text.lines()
            .enumerate()
            .map(|(n, l)| (n + 1, l.to_string()))
            .collect()
    };
    let settings = parse_unit(&lines(
        "# a comment\n[Service]\n; another\nEnvironment=A=1 \\\n  # skipped\n  B=2\nUser = svc\n",
    ))
    .unwrap();
    let read: Vec<(&str, &str, usize)> = settings
        .iter()
        .map(|s| (s.key.as_str(), s.value.as_str(), s.line))
        .collect();
    assert_eq!(read, [("Environment", "A=1  B=2", 4), ("User", "svc", 7)]);
    assert!(
        parse_unit(&lines("User=svc\n"))
            .unwrap_err()
            .contains("before any section")
    );
    assert!(parse_unit(&lines("[Service]\njust words\n")).is_err());
    assert!(parse_unit(&lines("[Service\n")).is_err());
    assert!(parse_unit(&lines("[Service]\nUser=svc \\\n")).is_err());
    // A comment after a value is read as part of it, which the test above refuses.
    let inline = parse_unit(&lines(
        "[Service]\nEnvironmentFile=-/etc/x.env   # secret\n",
    ))
    .unwrap();
    assert_eq!(inline[0].value, "-/etc/x.env   # secret");
    assert_eq!(
        environment_assignments(r#"A=1 "B=two words" 'C=x y'"#).unwrap(),
        [
            ("A".to_string(), "1".to_string()),
            ("B".to_string(), "two words".to_string()),
            ("C".to_string(), "x y".to_string()),
        ]
    );
    assert!(environment_assignments("A=1 nonsense").is_err());
    assert!(environment_assignments("\"A=1").is_err());
    let blocks = fenced_blocks(
        "text\n```ini\n[Unit]\n```\n1. item\n   ```sh\n   # /etc/x\n   A=1\n   ```\n",
    );
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[1].info, "sh");
    assert_eq!(block_path(&blocks[1]).as_deref(), Some("/etc/x"));
    assert_eq!(blocks[1].lines[1], (8, "A=1".to_string()));
}

/// A login role that must give its password (scripts/pg's pg_hba asks one of members of
/// `svc_password_required`), a database of its own, and its URL without the password.
struct PasswordRole {
    admin: String,
    name: String,
    password: String,
    url: String,
    host: String,
    port: String,
}

/// psql, from the PostgreSQL that scripts/pg runs.
fn psql() -> Option<std::path::PathBuf> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/pg");
    let bin = std::process::Command::new(script)
        .arg("bin")
        .output()
        .ok()?;
    let path = Path::new(String::from_utf8_lossy(&bin.stdout).trim()).join("psql");
    (bin.status.success() && path.is_file()).then_some(path)
}

/// Runs `sql` on `url` with psql, asking no password and reading none from the environment
/// or a password file: whether it succeeded, and what psql said.
fn run_sql(psql: &Path, url: &str, sql: &str) -> (bool, String) {
    let output = std::process::Command::new(psql)
        .args([
            "-w",
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            url,
            "-c",
            sql,
        ])
        .env_remove("PGPASSWORD")
        .env("PGPASSFILE", "/nonexistent")
        .output()
        .expect("run psql");
    let said = String::from_utf8_lossy(&output.stderr).to_string();
    (output.status.success(), said)
}

impl PasswordRole {
    /// `None` when there is no cluster, or (outside CI) it asks no password of the role.
    fn create() -> Option<PasswordRole> {
        let admin = svc_catalog::testing::test_cluster("SVC_TEST_POSTGRES")?;
        // postgres://USER@HOST:PORT/DATABASE, as scripts/pg prints it.
        let rest = admin.split_once("://").expect("a URL").1;
        let rest = rest.split_once('@').map_or(rest, |(_, r)| r);
        let authority = rest.split(['/', '?']).next().expect("host and port");
        let (host, port) = authority
            .rsplit_once(':')
            .map_or((authority, "5432"), |(h, p)| (h, p));
        let stamp = svc_syntax::now_unix_micros();
        let name = format!("svc_pw_{}_{stamp}", std::process::id());
        // Made up per run: a password no one uses elsewhere.
        let password = format!("pw-{stamp}-{}", std::process::id());
        let Some(psql) = psql() else {
            let note = "no psql to make a role with (scripts/pg bin names none)";
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{note}");
            eprintln!("SKIPPED: {note}");
            return None;
        };
        let (made, said) = run_sql(
            &psql,
            &admin,
            "DO $$ BEGIN CREATE ROLE svc_password_required NOLOGIN; \
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$",
        );
        assert!(made, "the group role: {said}");
        let (made, said) = run_sql(
            &psql,
            &admin,
            &format!(
                "CREATE ROLE {name} LOGIN PASSWORD '{password}' IN ROLE svc_password_required"
            ),
        );
        assert!(made, "a role with a password: {said}");
        let (made, said) = run_sql(
            &psql,
            &admin,
            &format!("CREATE DATABASE {name} OWNER {name}"),
        );
        assert!(made, "its database: {said}");
        let role = PasswordRole {
            url: format!("postgres://{name}@{host}:{port}/{name}"),
            admin: admin.clone(),
            name,
            password,
            host: host.to_string(),
            port: port.to_string(),
        };
        let (connected, said) = run_sql(&psql, &role.url, "SELECT 1");
        assert!(connected || said.contains("no password supplied"), "{said}");
        if connected {
            let note = "the test cluster asks no password of svc_password_required's members \
                        (scripts/pg's pg_hba.conf does)";
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{note}");
            eprintln!("SKIPPED: {note}");
            return None;
        }
        Some(role)
    }
}

impl Drop for PasswordRole {
    fn drop(&mut self) {
        let name = &self.name;
        if let Some(psql) = psql() {
            run_sql(
                &psql,
                &self.admin,
                &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            );
            run_sql(&psql, &self.admin, &format!("DROP ROLE IF EXISTS {name}"));
        }
    }
}

/// `svc serve` on `db` as an indexer, in an environment holding no password but `env`'s (and
/// a home of its own, so that no ~/.pgpass of the one running the tests is read): the server
/// once ready, or its exit code and log.
fn serve(
    db: &str,
    home: &Path,
    env: &[(&str, &std::ffi::OsStr)],
    extra: &[&str],
) -> Result<Server, (Option<i32>, Vec<String>)> {
    let mut command = svc();
    command
        .args([
            "serve",
            "--firehose",
            "none",
            "--listen",
            "127.0.0.1:0",
            "--db",
            db,
        ])
        .args(extra)
        .env("SVC_LOG", "info")
        .env("HOME", home)
        .env_remove("PGPASSWORD")
        .env_remove("PGPASSFILE")
        .env_remove("SVC_DB_PASSWORD_FILE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("start svc serve");
    let stderr = child.stderr.take().expect("stderr");
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match receiver.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => {
                let listening = line.split("listening on ").nth(1).map(str::trim);
                if let Some(url) = listening.map(str::to_string) {
                    log.push(line);
                    let mut server = Server {
                        url,
                        child,
                        stderr: receiver,
                        log,
                    };
                    server.wait_ready();
                    return Ok(server);
                }
                log.push(line);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait().expect("wait for svc serve");
                return Err((status.code(), log));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                panic!("svc serve neither listened nor stopped: {log:?}");
            }
        }
    }
}

#[test]
fn a_password_given_apart_from_the_url_reaches_a_database_that_asks_for_one() {
    let _cluster = shared_cluster();
    let Some(role) = PasswordRole::create() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let mut printed = Vec::new();
    let mut started = |env: &[(&str, &std::ffi::OsStr)], extra: &[&str], source: &str| {
        let mut server = serve(&role.url, &home, env, extra)
            .unwrap_or_else(|(code, log)| panic!("{source}: exit {code:?}: {log:?}"));
        let (status, stats) = server.get("/v1/stats");
        assert_eq!(status, 200, "{source}: {stats}");
        server.wait_log(
            &format!("catalog password: from {source}"),
            Duration::from_secs(5),
        );
        printed.extend(server.log.clone());
        assert_eq!(server.stop().code(), Some(0), "{source}");
    };

    // PGPASSWORD, as an EnvironmentFile= would set it.
    let password = std::ffi::OsString::from(&role.password);
    started(&[("PGPASSWORD", &password)], &[], "PGPASSWORD");

    // --db-password-file, and its variable, as a systemd credential gives it (a line break
    // after the password, as `echo` writes it).
    let file = dir.path().join("db-password");
    std::fs::write(&file, format!("{}\n", role.password)).unwrap();
    started(
        &[],
        &["--db-password-file", file.to_str().unwrap()],
        "the password file",
    );
    started(
        &[("SVC_DB_PASSWORD_FILE", file.as_os_str())],
        &[],
        "the password file",
    );
    // The file's password comes before PGPASSWORD's, as a URL's would.
    let wrong = std::ffi::OsString::from("not-the-password");
    started(
        &[("PGPASSWORD", &wrong)],
        &["--db-password-file", file.to_str().unwrap()],
        "the password file",
    );

    // A .pgpass line for this host, port, database and user, among others, mode 0600.
    let pgpass = home.join(".pgpass");
    std::fs::write(
        &pgpass,
        format!(
            "# svc\n{host}:{port}:other:{name}:wrong\n{host}:{port}:{name}:{name}:{password}\n\
             *:*:*:*:wrong\n",
            host = role.host,
            port = role.port,
            name = role.name,
            password = role.password.replace('\\', "\\\\").replace(':', "\\:"),
        ),
    )
    .unwrap();
    set_mode(&pgpass, 0o600);
    started(&[], &[], &pgpass.display().to_string());
    let elsewhere = dir.path().join("pgpass");
    std::fs::copy(&pgpass, &elsewhere).unwrap();
    set_mode(&elsewhere, 0o600);
    std::fs::remove_file(&pgpass).unwrap();
    started(
        &[("PGPASSFILE", elsewhere.as_os_str())],
        &[],
        &elsewhere.display().to_string(),
    );

    // What does not give the password stops svc at start, saying why.
    let refused = |env: &[(&str, &std::ffi::OsStr)], extra: &[&str], expected: &[&str]| {
        let Err((code, log)) = serve(&role.url, &home, env, extra) else {
            panic!("started without the password: {expected:?}")
        };
        let log = log.join("\n");
        assert!(code == Some(1) || code == Some(2), "{code:?}: {log}");
        for text in expected {
            assert!(log.contains(text), "{text:?} not in: {log}");
        }
        assert!(
            !log.contains(&role.password),
            "the password was printed: {log}"
        );
    };
    refused(
        &[],
        &[],
        &[
            "password missing",
            "give it with --db-password-file, PGPASSWORD or a .pgpass file",
        ],
    );
    set_mode(&elsewhere, 0o644);
    refused(
        &[("PGPASSFILE", elsewhere.as_os_str())],
        &[],
        &[
            "ignored: group or others may access it (mode 0644)",
            "password missing",
        ],
    );
    refused(
        &[("PGPASSWORD", &wrong)],
        &[],
        &["password authentication failed"],
    );
    let missing = dir.path().join("missing");
    refused(
        &[],
        &["--db-password-file", missing.to_str().unwrap()],
        &[&format!(
            "--db-password-file: password file {}: ",
            missing.display()
        )],
    );
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    refused(
        &[],
        &["--db-password-file", empty.to_str().unwrap()],
        &["is empty"],
    );
    let inline = role.url.replacen('@', ":inline-password@", 1);
    let Err((code, log)) = serve(
        &inline,
        &home,
        &[],
        &["--db-password-file", file.to_str().unwrap()],
    ) else {
        panic!("two passwords were taken")
    };
    assert_eq!(code, Some(2), "{log:?}");
    assert!(
        log.join("\n")
            .contains("carries a password, and --db-password-file gives another")
    );
    assert!(!log.join("\n").contains("inline-password"));
    let Err((code, log)) = serve(
        &dir.path().join("catalog.db").to_string_lossy(),
        &home,
        &[],
        &["--db-password-file", file.to_str().unwrap()],
    ) else {
        panic!("a password file for an SQLite catalog was taken")
    };
    assert_eq!(code, Some(2), "{log:?}");
    assert!(
        log.join("\n")
            .contains("--db-password-file is for a PostgreSQL catalog")
    );

    assert!(
        !printed.join("\n").contains(&role.password),
        "the password was printed"
    );
}

fn set_mode(path: &Path, mode: u32) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}
