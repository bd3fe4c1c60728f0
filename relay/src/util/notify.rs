//! systemd's readiness protocol (`sd_notify`): under `Type=notify`
//! systemd counts the relay started once it says `READY=1` (it serves,
//! and SIGHUP reloads), so a `systemctl reload` right after a start waits
//! for it instead of signalling a process still loading; `STOPPING=1` says
//! a stop has begun. Without `$NOTIFY_SOCKET` (not under systemd) nothing
//! is sent.

use std::ffi::OsStr;
use std::os::unix::net::UnixDatagram;

/// Tells systemd the relay serves.
pub(crate) fn ready() {
    tell("READY=1");
}

/// Tells systemd the relay is stopping.
pub(crate) fn stopping() {
    tell("STOPPING=1");
}

fn tell(state: &str) {
    if let Some(socket) = std::env::var_os("NOTIFY_SOCKET")
        && let Err(e) = send(&socket, state)
    {
        tracing::warn!(error = %e, state, "systemd's notify socket did not take the relay's state");
    }
}

/// Sends `state` to the notify socket `socket` (a path, or `@NAME` for
/// an abstract one).
pub(crate) fn send(socket: &OsStr, state: &str) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let out = UnixDatagram::unbound()?;
    match socket.as_bytes().split_first() {
        None => Ok(()),
        Some((b'@', name)) => abstract_socket(&out, name, state),
        Some(_) => out.send_to(state.as_bytes(), socket).map(|_| ()),
    }
}

#[cfg(target_os = "linux")]
fn abstract_socket(out: &UnixDatagram, name: &[u8], state: &str) -> std::io::Result<()> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
    out.send_to_addr(state.as_bytes(), &addr).map(|_| ())
}

#[cfg(not(target_os = "linux"))]
fn abstract_socket(_: &UnixDatagram, _: &[u8], _: &str) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "an abstract socket outside Linux",
    ))
}

#[cfg(test)]
mod tests {
    use super::send;

    #[test]
    fn the_state_reaches_a_socket_by_path_or_abstract_name() {
        let dir = std::env::temp_dir().join(format!("dripfeed-notify-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify");
        let listening = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        send(path.as_os_str(), "READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = listening.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");

        #[cfg(target_os = "linux")]
        {
            use std::os::linux::net::SocketAddrExt;
            let name = format!("dripfeed-notify-{}", fastrand::u64(..));
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
            let listening = std::os::unix::net::UnixDatagram::bind_addr(&addr).unwrap();
            send(std::ffi::OsStr::new(&format!("@{name}")), "STOPPING=1").unwrap();
            let n = listening.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"STOPPING=1");
        }
        assert!(send(dir.join("nobody").as_os_str(), "READY=1").is_err());
        send(std::ffi::OsStr::new(""), "READY=1").unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
