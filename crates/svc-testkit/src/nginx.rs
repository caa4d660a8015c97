//! Debian's nginx in front of svc, for the tests and benchmarks that run the deployment
//! guide's proxy: deploy/nginx.conf with its ports alone substituted, in a directory of its
//! own, ended by SIGTERM (so that its workers end with it).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The guide's site, as deployed.
pub const NGINX_CONF: &str = include_str!("../../../deploy/nginx.conf");

/// nginx's binary (`SVC_NGINX`, else Debian's, as scripts/nginx finds it); `None` outside CI
/// when it is not installed, which the caller reports as skipped. Under `CI=true` a missing
/// nginx is a failure.
pub fn binary() -> Option<PathBuf> {
    let path = std::env::var_os("SVC_NGINX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/sbin/nginx"));
    if path.is_file() {
        return Some(path);
    }
    let note = format!("no nginx at {} (scripts/nginx install)", path.display());
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{note}");
    eprintln!("SKIPPED: {note}");
    None
}

pub struct Nginx {
    child: Child,
    pub addr: SocketAddr,
    pub url: String,
    dir: tempfile::TempDir,
}

impl Nginx {
    /// Starts `binary` with deploy/nginx.conf in front of `replicas` on a free loopback port,
    /// `main` holding the main context's own directives (workers, `events`), and waits until
    /// it accepts connections.
    pub fn start(binary: &Path, replicas: [&str; 2], main: &str) -> Nginx {
        let dir = tempfile::tempdir().expect("nginx's directory");
        // Run as root, nginx's workers drop to `nobody`, who must reach its files.
        {
            use std::os::unix::fs::PermissionsExt;
            let open = std::fs::Permissions::from_mode(0o755);
            std::fs::set_permissions(dir.path(), open).expect("nginx's directory opened");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let here = dir.path().display().to_string();
        std::fs::write(dir.path().join("svc.conf"), site(port, replicas)).expect("the site");
        let conf =
            format!("{main}\nhttp {{\n    access_log off;\n    include {here}/svc.conf;\n}}\n");
        std::fs::write(dir.path().join("nginx.conf"), conf).expect("nginx.conf");
        let child = Command::new(binary)
            .args(["-p", &here, "-c", &format!("{here}/nginx.conf")])
            .args(["-e", &format!("{here}/error.log")])
            .args(["-g", &format!("daemon off; pid {here}/nginx.pid;")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut nginx = Nginx {
            child,
            addr,
            url: format!("http://{addr}"),
            dir,
        };
        nginx.wait_accepting();
        nginx
    }

    fn wait_accepting(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(self.addr).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("nginx stopped ({status}): {}", self.error_log());
            }
            assert!(
                Instant::now() < deadline,
                "nginx did not listen: {}",
                self.error_log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What nginx logged of its errors.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }

    /// Whether nginx has stopped.
    pub fn stopped(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        crate::terminate(&mut self.child, Duration::from_secs(5));
    }
}

/// deploy/nginx.conf listening on `port` of loopback, its two replicas `replicas`: each
/// placeholder, which must occur exactly once, replaced.
fn site(port: u16, replicas: [&str; 2]) -> String {
    let replacements = [
        ("listen 8080;", format!("listen 127.0.0.1:{port};")),
        ("server 127.0.0.1:8788 ", format!("server {} ", replicas[0])),
        ("server 127.0.0.1:8789 ", format!("server {} ", replicas[1])),
    ];
    let mut text = NGINX_CONF.to_string();
    for (placeholder, value) in replacements {
        assert_eq!(
            text.matches(placeholder).count(),
            1,
            "deploy/nginx.conf holds {placeholder:?} once"
        );
        text = text.replace(placeholder, &value);
    }
    text
}
