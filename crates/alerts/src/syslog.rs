//! Syslog: the message's RFC 5424 line over UDP (one datagram), TCP or TLS
//! (RFC 5425 octet counting: `LENGTH SP LINE`), one connection per message.

use std::{net::SocketAddr, path::Path, time::Duration};

use gtm_model::compile::SyslogTransport;
use tokio::{io::AsyncWriteExt, net::TcpStream};

use super::message::Message;

/// The longest line sent over UDP (RFC 5426 lets receivers drop more than
/// 480 bytes over IPv4; most take 2 KiB).
const UDP_MAX: usize = 2048;

pub struct Target<'a> {
    pub host: &'a str,
    pub port: u16,
    pub transport: SyslogTransport,
    pub facility: u8,
    pub ca_file: Option<&'a Path>,
}

async fn address(host: &str, port: u16) -> Result<SocketAddr, String> {
    tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| format!("{host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}: no address"))
}

/// Sends `message`.
pub async fn send(target: &Target<'_>, message: &Message) -> Result<(), String> {
    let line = message.syslog(target.facility);
    let to = address(target.host, target.port).await?;
    let io = |e: std::io::Error| format!("syslog {to}: {e}");
    let framed = format!("{} {line}", line.len());
    match target.transport {
        SyslogTransport::Udp => {
            let local: SocketAddr = if to.is_ipv4() {
                "0.0.0.0:0".parse().unwrap_or(to)
            } else {
                "[::]:0".parse().unwrap_or(to)
            };
            let socket = tokio::net::UdpSocket::bind(local).await.map_err(io)?;
            let mut bytes = line.into_bytes();
            bytes.truncate(UDP_MAX);
            socket.send_to(&bytes, to).await.map_err(io)?;
        }
        SyslogTransport::Tcp => {
            let mut stream = connect(to).await?;
            stream.write_all(framed.as_bytes()).await.map_err(io)?;
            stream.shutdown().await.map_err(io)?;
        }
        SyslogTransport::Tls => {
            let stream = connect(to).await?;
            let config = super::tls::client(target.ca_file)?;
            let name = rustls_pki_types::ServerName::try_from(target.host.to_string())
                .map_err(|e| format!("syslog {}: {e}", target.host))?;
            let mut tls = tokio::time::timeout(
                Duration::from_secs(10),
                tokio_rustls::TlsConnector::from(config).connect(name, stream),
            )
            .await
            .map_err(|_| format!("syslog {to}: TLS handshake timed out"))?
            .map_err(io)?;
            tls.write_all(framed.as_bytes()).await.map_err(io)?;
            tls.shutdown().await.map_err(io)?;
        }
    }
    Ok(())
}

async fn connect(to: SocketAddr) -> Result<TcpStream, String> {
    tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(to))
        .await
        .map_err(|_| format!("syslog {to}: connect timed out"))?
        .map_err(|e| format!("syslog {to}: {e}"))
}
