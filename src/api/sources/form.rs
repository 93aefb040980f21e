//! Reading a `multipart/form-data` upload part by part, and turning it into a source to add.

use axum::extract::Multipart;
use axum::http::StatusCode;
use serde_json::Value;

use crate::api::error::ApiError;
use crate::domain::SourceFormat;
use crate::service::sources::{AddSource, Document, Precondition, UploadSlot};

use super::AddSourceUpload;
use super::upload::{parse_details, parse_key};

/// The `file` part's own name and content type (`application/octet-stream` counts as none).
pub(super) struct FilePart {
    name: Option<String>,
    content_type: Option<String>,
}

impl AddSourceUpload {
    /// Reads a multipart upload: one `file` part, optionally `filename` and `content_type` text
    /// parts that override the file part's own, and optionally `title`, `url`, `metadata` (JSON
    /// text) and `key` parts. Any other part, or a second one of a kind, is refused as JSON
    /// bodies refuse unknown or repeated fields. Returns the form and the file part's own name
    /// and content type.
    pub(super) async fn read(mut multipart: Multipart, limit: usize) -> Result<(Self, FilePart), ApiError> {
        let too_large = |err: axum::extract::multipart::MultipartError| {
            if err.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::payload_too_large(limit)
            } else {
                ApiError::invalid_request(format!("invalid multipart body: {}", err.body_text()))
            }
        };
        let mut file: Option<(FilePart, Vec<u8>)> = None;
        let mut form = AddSourceUpload {
            file: Vec::new(),
            filename: None,
            content_type: None,
            title: None,
            url: None,
            metadata: None,
            key: None,
        };
        while let Some(field) = multipart.next_field().await.map_err(too_large)? {
            let name = field.name().unwrap_or_default().to_owned();
            let repeated = || field_error(&name, format!("the upload has more than one `{name}` part"));
            let slot = match name.as_str() {
                "file" => {
                    if file.is_some() {
                        return Err(repeated());
                    }
                    let part = FilePart {
                        name: field.file_name().map(str::to_owned),
                        content_type: field
                            .content_type()
                            .map(str::to_owned)
                            .filter(|ct| ct != "application/octet-stream"),
                    };
                    let bytes = field.bytes().await.map_err(too_large)?;
                    file = Some((part, Vec::from(bytes)));
                    continue;
                }
                "filename" => &mut form.filename,
                "content_type" => &mut form.content_type,
                "title" => &mut form.title,
                "url" => &mut form.url,
                "metadata" => &mut form.metadata,
                "key" => &mut form.key,
                _ => {
                    return Err(field_error(
                        &name,
                        format!(
                            "unknown part `{name}` (expected `file`, and optionally `filename`, `content_type`, \
                             `title`, `url`, `metadata` and `key`)"
                        ),
                    ));
                }
            };
            if slot.is_some() {
                return Err(repeated());
            }
            *slot = Some(field.text().await.map_err(too_large)?);
        }
        let Some((part, bytes)) = file else {
            return Err(field_error("file", "multipart upload has no `file` field".into()));
        };
        form.file = bytes;
        Ok((form, part))
    }

    /// The upload the form describes, its parts checked as a JSON body's fields are.
    pub(super) fn into_source(self, part: FilePart, slot: UploadSlot) -> Result<AddSource, ApiError> {
        let AddSourceUpload {
            file: bytes,
            filename,
            content_type,
            title,
            url,
            metadata,
            key,
        } = self;
        let metadata = match metadata {
            None => None,
            Some(raw) => Some(serde_json::from_str::<Value>(&raw).map_err(|err| {
                field_error(
                    "metadata",
                    format!("the `metadata` part must be a JSON object of string values ({err})"),
                )
            })?),
        };
        let (title, url, metadata) = parse_details(title.as_deref(), url.as_deref(), metadata.as_ref())?;
        let content_type = content_type.or(part.content_type);
        // A PDF by its content type, or, when none is given, by its name or its `%PDF-` header.
        let named = filename.as_deref().or(part.name.as_deref());
        let pdf = match content_type.as_deref().map(str::trim).filter(|ct| !ct.is_empty()) {
            Some(ct) => SourceFormat::of(ct) == Some(SourceFormat::Pdf),
            None => {
                named.is_some_and(|n| SourceFormat::guess(n) == SourceFormat::Pdf)
                    || crate::chunking::pdf::looks_like_pdf(&bytes)
            }
        };
        // A file part sent without a name is named after its content type, so that the name
        // does not contradict how the text is read.
        let filename = filename.or(part.name).unwrap_or_else(|| {
            let format = if pdf {
                Some(SourceFormat::Pdf)
            } else {
                content_type.as_deref().and_then(SourceFormat::of)
            };
            format!("upload.{}", format.unwrap_or(SourceFormat::Plain).extension())
        });
        let document = if pdf {
            Document::Pdf(bytes)
        } else {
            Document::Text(
                String::from_utf8(bytes)
                    .map_err(|_| field_error("file", "the uploaded file is not valid UTF-8 text (nor a PDF)".into()))?,
            )
        };
        Ok(AddSource {
            slot,
            filename,
            content_type,
            document,
            title,
            url,
            metadata,
            key: parse_key(key.as_deref())?,
            target: None,
            precondition: Precondition::default(),
        })
    }
}

/// `invalid_request` naming a part of a multipart upload.
fn field_error(field: &str, message: String) -> ApiError {
    ApiError::invalid_request(message).with_details(serde_json::json!({"field": field}))
}
