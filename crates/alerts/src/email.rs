//! E-mail over SMTP (lettre): STARTTLS by default (the server must offer
//! it), implicit TLS, or none; the sender's credentials from a file on the
//! device. The subject names the status, severity, event and device.

use std::{path::Path, time::Duration};

use gtm_model::compile::SmtpTls;
use lettre::{
    AsyncSmtpTransport, AsyncTransport, Tokio1Executor,
    message::header::ContentType,
    transport::smtp::{
        authentication::Credentials,
        client::{Certificate, Tls, TlsParameters},
    },
};

use super::message::Message;

pub struct Smtp<'a> {
    pub host: &'a str,
    pub port: u16,
    pub tls: SmtpTls,
    pub from: &'a str,
    pub to: &'a [String],
    pub username: Option<&'a str>,
    pub password_file: Option<&'a Path>,
    pub ca_file: Option<&'a Path>,
}

fn tls_parameters(host: &str, ca_file: Option<&Path>) -> Result<TlsParameters, String> {
    let mut builder = TlsParameters::builder(host.to_string());
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).map_err(|e| format!("ca_file {}: {e}", path.display()))?;
        let cert =
            Certificate::from_pem(&pem).map_err(|e| format!("ca_file {}: {e}", path.display()))?;
        builder = builder.add_root_certificate(cert);
    }
    builder.build_rustls().map_err(|e| e.to_string())
}

/// Sends `message` to every recipient.
pub async fn send(smtp: &Smtp<'_>, message: &Message) -> Result<(), String> {
    let mut mail = lettre::Message::builder()
        .from(
            smtp.from
                .parse()
                .map_err(|e| format!("from {}: {e}", smtp.from))?,
        )
        .subject(message.subject())
        .header(ContentType::TEXT_PLAIN);
    for to in smtp.to {
        mail = mail.to(to.parse().map_err(|e| format!("to {to}: {e}"))?);
    }
    let mail = mail.body(message.body()).map_err(|e| e.to_string())?;
    let tls = match smtp.tls {
        SmtpTls::StartTls => Tls::Required(tls_parameters(smtp.host, smtp.ca_file)?),
        SmtpTls::Tls => Tls::Wrapper(tls_parameters(smtp.host, smtp.ca_file)?),
        SmtpTls::None => Tls::None,
    };
    let mut transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(smtp.host)
        .port(smtp.port)
        .tls(tls)
        .timeout(Some(Duration::from_secs(20)));
    if let (Some(user), Some(path)) = (smtp.username, smtp.password_file) {
        let password =
            super::webhook::secret(path).map_err(|e| e.replace("secret_file", "password_file"))?;
        transport = transport.credentials(Credentials::new(
            user.to_string(),
            String::from_utf8_lossy(&password).into_owned(),
        ));
    }
    transport.build().send(mail).await.map(drop).map_err(|e| {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        format!("smtp {}:{}: {text}", smtp.host, smtp.port)
    })
}
