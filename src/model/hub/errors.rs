//! The hub's refusals as errors a user can act on: hf-hub's `ApiError` (a
//! ureq status with the hub's `X-Error-Code`, or no answer at all) becomes a
//! lowercase message naming the repository and what to check: the id and the
//! revision (404 `RepoNotFound`, `RevisionNotFound`), the terms and HF_TOKEN
//! (401/403 `GatedRepo`), the network or HF_HUB_OFFLINE. It decides nothing
//! else: no retry, no fallback.

use hf_hub::api::sync::ApiError;

/// The hub's answer as a user needs it: what went wrong and what to check.
/// `file` is the file asked for (`None`: the repository's model info).
pub fn explain(
    error: ApiError,
    repo: &str,
    revision: &str,
    endpoint: &str,
    file: Option<&str>,
) -> anyhow::Error {
    let what = match file {
        Some(f) => format!("{f} of hub repository {repo}@{revision}"),
        None => format!("hub repository {repo}@{revision}"),
    };
    // What was asked, for a message that already names the repository.
    let asked = file.unwrap_or("its model info");
    let ApiError::RequestError(request) = error else {
        return anyhow::Error::new(error).context(format!("cannot fetch {what} from {endpoint}"));
    };
    let text = request.to_string();
    let Some(response) = request.into_response() else {
        return anyhow::anyhow!(
            "cannot reach the hub at {endpoint} for {what}: {text}; without a network, set \
             HF_HUB_OFFLINE=1 to use the cache, or use a local copy of the model"
        );
    };
    let status = response.status();
    let code = response.header("x-error-code").unwrap_or_default();
    match (status, code) {
        (_, "GatedRepo") | (403, _) => anyhow::anyhow!(
            "hub repository {repo} is gated ({status} for {asked}): accept its terms at \
             {endpoint}/{repo} while logged in, then set HF_TOKEN to a token of that account"
        ),
        (_, "RevisionNotFound") => anyhow::anyhow!(
            "hub repository {repo} has no revision {revision} ({status}): check the branch, \
             tag or commit after '@'"
        ),
        (_, "EntryNotFound") => anyhow::anyhow!(
            "hub repository {repo}@{revision} lists {} but the hub has no such file ({status})",
            file.unwrap_or("a file")
        ),
        (404, _) | (_, "RepoNotFound") => anyhow::anyhow!(
            "hub repository {repo} was not found at {endpoint} ({status}): check the id \
             (org/name, as in the model page's address) and the revision; a private \
             repository needs HF_TOKEN"
        ),
        (401, _) => anyhow::anyhow!(
            "hub repository {repo} is gated or private ({status} for {asked}): accept its \
             terms at {endpoint}/{repo} while logged in, then set HF_TOKEN to a token of \
             that account"
        ),
        _ => anyhow::anyhow!(
            "the hub at {endpoint} answered {status} for {what}: try again later, or set \
             HF_HUB_OFFLINE=1 to use the cache"
        ),
    }
}
