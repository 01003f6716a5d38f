//! `[telemetry]`: validation, defaults, and the standard `OTEL_*` variables
//! that fill what the table leaves out.
//!
//! Without the table nothing is exported, whatever the environment says: an
//! `OTEL_EXPORTER_OTLP_ENDPOINT` meant for another program in the same
//! environment does not switch export on. Inside the table the file wins over
//! the environment, key by key (and header by header).

use std::time::Duration;

use secrecy::SecretString;

use super::error::ConfigError;
use super::keypath::KeyPath;
use super::model::{OtlpProtocol, SampleRatio, TelemetrySettings};
use super::raw::{RawSecretSource, RawTelemetry};
use super::validate::Validator;
use super::values::{self, short_quote};

/// Default `telemetry.service_name` (the `service.name` resource attribute).
pub(crate) const DEFAULT_SERVICE_NAME: &str = "mcp-supervisor";
/// The OpenTelemetry SDKs' defaults.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_BATCH_DELAY: Duration = Duration::from_secs(5);
const DEFAULT_MAX_QUEUE: usize = 2048;
const DEFAULT_METRICS_INTERVAL: Duration = Duration::from_secs(60);
/// Upper bound of `max_queue`: spans held in memory while the collector is away.
const MAX_QUEUE: usize = 1_000_000;

/// Headers the exporter sets itself.
const RESERVED_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "content-encoding",
    "host",
    "te",
    "transfer-encoding",
];

impl Validator<'_> {
    /// `None` when the environment switches the SDK off (`OTEL_SDK_DISABLED=true`).
    pub(super) fn telemetry(
        &self,
        key: &KeyPath,
        raw: RawTelemetry,
    ) -> Result<Option<TelemetrySettings>, ConfigError> {
        if self
            .var("OTEL_SDK_DISABLED")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        {
            return Ok(None);
        }
        let protocol = self.otlp_protocol(key, raw.protocol)?;
        let endpoint = self.otlp_endpoint(&key.key("endpoint"), raw.endpoint, protocol)?;
        let headers = self.otlp_headers(&key.key("headers"), raw.headers)?;
        let service_name = match raw.service_name.or_else(|| self.var("OTEL_SERVICE_NAME")) {
            Some(name) if !name.trim().is_empty() && !name.chars().any(char::is_control) => name,
            Some(_) => {
                return Err(self.invalid(
                    &key.key("service_name"),
                    "must be a non-empty name without control characters",
                ));
            }
            None => DEFAULT_SERVICE_NAME.to_owned(),
        };
        let sample_ratio = self.sample_ratio(&key.key("sample_ratio"), raw.sample_ratio)?;
        let timeout = self.otel_duration(
            &key.key("timeout"),
            raw.timeout,
            "OTEL_EXPORTER_OTLP_TIMEOUT",
            DEFAULT_TIMEOUT,
        )?;
        let batch_delay = self.otel_duration(
            &key.key("batch_delay"),
            raw.batch_delay,
            "OTEL_BSP_SCHEDULE_DELAY",
            DEFAULT_BATCH_DELAY,
        )?;
        let metrics_interval = self.otel_duration(
            &key.key("metrics_interval"),
            raw.metrics_interval,
            "OTEL_METRIC_EXPORT_INTERVAL",
            DEFAULT_METRICS_INTERVAL,
        )?;
        let here = key.key("max_queue");
        let max_queue = match (raw.max_queue, self.var("OTEL_BSP_MAX_QUEUE_SIZE")) {
            (Some(n), _) => self.check(&here, values::positive_usize(n, MAX_QUEUE))?,
            (None, Some(text)) => {
                let n = self.env_number(&here, "OTEL_BSP_MAX_QUEUE_SIZE", &text)?;
                self.check(&here, values::positive_usize(n, MAX_QUEUE))?
            }
            (None, None) => DEFAULT_MAX_QUEUE,
        };
        Ok(Some(TelemetrySettings {
            endpoint,
            protocol,
            headers,
            service_name,
            sample_ratio,
            timeout,
            batch_delay,
            max_queue,
            metrics_interval,
            capture_content: raw.capture_content.unwrap_or(false),
        }))
    }

    fn var(&self, name: &str) -> Option<String> {
        (self.env)(name).filter(|v| !v.trim().is_empty())
    }

    fn otlp_protocol(
        &self,
        key: &KeyPath,
        raw: Option<String>,
    ) -> Result<OtlpProtocol, ConfigError> {
        let (text, from_env) = match raw {
            Some(text) => (text, false),
            None => match self.var("OTEL_EXPORTER_OTLP_PROTOCOL") {
                Some(text) => (text, true),
                None => return Ok(OtlpProtocol::HttpProtobuf),
            },
        };
        let here = key.key("protocol");
        match text.trim() {
            "grpc" => Ok(OtlpProtocol::Grpc),
            "http/protobuf" => Ok(OtlpProtocol::HttpProtobuf),
            "http/json" => Err(self.invalid(
                &here,
                "\"http/json\" is not supported; use \"http/protobuf\" or \"grpc\"",
            )),
            other => Err(self.invalid(
                &here,
                format!(
                    "expected \"grpc\" or \"http/protobuf\", got {}{}",
                    short_quote(other),
                    if from_env {
                        " (from OTEL_EXPORTER_OTLP_PROTOCOL)"
                    } else {
                        ""
                    }
                ),
            )),
        }
    }

    fn otlp_endpoint(
        &self,
        key: &KeyPath,
        raw: Option<String>,
        protocol: OtlpProtocol,
    ) -> Result<url::Url, ConfigError> {
        let text = raw
            .or_else(|| self.var("OTEL_EXPORTER_OTLP_ENDPOINT"))
            .unwrap_or_else(|| {
                match protocol {
                    OtlpProtocol::Grpc => "http://localhost:4317",
                    OtlpProtocol::HttpProtobuf => "http://localhost:4318",
                }
                .to_owned()
            });
        self.check(key, values::http_url(&text))?;
        let mut url = self.check(key, url::Url::parse(&text).map_err(|e| e.to_string()))?;
        if url.query().is_some() || url.fragment().is_some() {
            return Err(self.invalid(
                key,
                "must not have a query or fragment; put a collector's key in 'headers'",
            ));
        }
        if protocol == OtlpProtocol::Grpc {
            if url.scheme() == "https" {
                return Err(self.invalid(
                    key,
                    "gRPC export is plain http:// in this build; use protocol = \"http/protobuf\" \
                     for an https:// collector",
                ));
            }
            if url.path() != "/" {
                return Err(self.invalid(key, "a gRPC endpoint has no path"));
            }
        }
        // The signal paths are appended to the base: no trailing slash.
        let trimmed = url.path().trim_end_matches('/').to_owned();
        url.set_path(&trimmed);
        Ok(url)
    }

    fn otlp_headers(
        &self,
        key: &KeyPath,
        raw: Option<std::collections::BTreeMap<String, RawSecretSource>>,
    ) -> Result<Vec<(String, SecretString)>, ConfigError> {
        let mut headers = Vec::new();
        for (name, source) in raw.unwrap_or_default() {
            let here = key.key(&name);
            let lower = self.header_name(&here, &name)?;
            let value = match (source.env, source.file) {
                (Some(var), None) => self.token_from_env(&here.key("env"), &var)?,
                (None, Some(path)) => self.token_from_file(&here.key("file"), &path)?,
                _ => return Err(self.invalid(&here, "set exactly one of 'env' or 'file'")),
            };
            self.header_value(&here, &value)?;
            headers.push((lower, value));
        }
        // `OTEL_EXPORTER_OTLP_HEADERS` adds the names the file does not set.
        if let Some(text) = (self.env)("OTEL_EXPORTER_OTLP_HEADERS") {
            for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
                let Some((name, value)) = pair.split_once('=') else {
                    return Err(self.invalid(
                        key,
                        "OTEL_EXPORTER_OTLP_HEADERS must be a list like \"name=value,name2=value2\"",
                    ));
                };
                let lower = self.header_name(key, name.trim())?;
                if headers.iter().any(|(n, _)| *n == lower) {
                    continue;
                }
                let value = percent_encoding::percent_decode_str(value.trim())
                    .decode_utf8_lossy()
                    .into_owned();
                let value = SecretString::from(value);
                self.header_value(key, &value)?;
                headers.push((lower, value));
            }
        }
        Ok(headers)
    }

    fn header_name(&self, key: &KeyPath, name: &str) -> Result<String, ConfigError> {
        let lower = name.to_ascii_lowercase();
        if http::HeaderName::from_bytes(lower.as_bytes()).is_err() {
            return Err(self.invalid(key, format!("{} is not a header name", short_quote(name))));
        }
        if RESERVED_HEADERS.contains(&lower.as_str()) {
            return Err(self.invalid(
                key,
                format!("{} is set by the exporter itself", short_quote(name)),
            ));
        }
        Ok(lower)
    }

    fn header_value(&self, key: &KeyPath, value: &SecretString) -> Result<(), ConfigError> {
        use secrecy::ExposeSecret;
        // The value is never quoted: it is a secret.
        if http::HeaderValue::from_str(value.expose_secret()).is_err() {
            return Err(self.invalid(key, "the value is not a valid header value"));
        }
        Ok(())
    }

    fn sample_ratio(&self, key: &KeyPath, raw: Option<f64>) -> Result<SampleRatio, ConfigError> {
        let ratio = match raw {
            Some(ratio) => ratio,
            None => match self.var("OTEL_TRACES_SAMPLER_ARG") {
                Some(text) => text.trim().parse::<f64>().map_err(|_| {
                    self.invalid(key, "OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1")
                })?,
                None => 1.0,
            },
        };
        SampleRatio::new(ratio).ok_or_else(|| self.invalid(key, "must be a number from 0 to 1"))
    }

    /// A duration from the file, else from `var` (milliseconds, the
    /// OpenTelemetry convention), else `default`.
    fn otel_duration(
        &self,
        key: &KeyPath,
        raw: Option<String>,
        var: &str,
        default: Duration,
    ) -> Result<Duration, ConfigError> {
        if raw.is_some() {
            return self.duration(key, raw, default);
        }
        match self.var(var) {
            Some(text) => {
                let ms = self.env_number(key, var, &text)?;
                if ms <= 0 {
                    return Err(self.invalid(key, format!("{var} must be a positive number of ms")));
                }
                Ok(Duration::from_millis(ms.unsigned_abs()))
            }
            None => Ok(default),
        }
    }

    fn env_number(&self, key: &KeyPath, var: &str, text: &str) -> Result<i64, ConfigError> {
        text.trim()
            .parse()
            .map_err(|_| self.invalid(key, format!("{var} must be a whole number")))
    }
}
