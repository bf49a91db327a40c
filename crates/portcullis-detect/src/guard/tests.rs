//! The guard's tests: every format, its near misses, overlaps, masking.

use super::*;

// Every fake secret below is assembled at run time from a seeded generator or
// repeated characters, so that secret scanners do not flag the repository.

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const UPPER_ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn fake_from(alphabet: &[u8], n: usize, seed: u64) -> String {
    let mut x = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            alphabet[((x >> 33) % alphabet.len() as u64) as usize] as char
        })
        .collect()
}

/// Random base62 with at least one digit, upper and lower case letter.
fn fake(n: usize, seed: u64) -> String {
    format!("aB3{}", fake_from(ALNUM, n.saturating_sub(3), seed))
}

fn config(canaries: &[&str]) -> EgressConfig {
    EgressConfig {
        canaries: canaries.iter().map(|s| s.to_string()).collect(),
        mask_secrets: true,
        mask_pii: true,
        entropy_bits: 4.5,
        entropy_min_len: 32,
        result_weight: 0.4,
    }
}

fn guard() -> EgressGuard {
    EgressGuard::new(&config(&[])).unwrap()
}

fn rules(g: &EgressGuard, text: &str) -> Vec<String> {
    g.scan(text).into_iter().map(|f| f.rule).collect()
}

/// Exactly one finding, of `rule`, whose span is `secret` inside `text`; its excerpt
/// does not leak the secret. Returns the finding.
fn expect_one(g: &EgressGuard, text: &str, rule: &str, secret: &str) -> Finding {
    let found = g.scan(text);
    assert_eq!(found.len(), 1, "{rule} in {text:?}: {found:#?}");
    let f = found.into_iter().next().unwrap();
    assert_eq!(f.rule, rule, "{text:?}");
    assert_eq!(f.view, "original");
    assert!(!f.allowlisted);
    let start = text.find(secret).unwrap();
    assert_eq!(
        (f.span.start, f.span.end),
        (start, start + secret.len()),
        "span of {rule} in {text:?}"
    );
    match (f.category.as_str(), f.rule.as_str()) {
        // The public header line is shown; the body is checked by the PEM test.
        (_, "egress.private_key") => {}
        // PII shows a masked form (last four digits, domain).
        ("pii", _) => assert!(!f.excerpt.contains(secret), "{}", f.excerpt),
        _ => assert_no_leak(&f.excerpt, secret),
    }
    f
}

/// The excerpt contains no 6-char window of the secret (only a <= 4-char prefix).
fn assert_no_leak(excerpt: &str, secret: &str) {
    let chars: Vec<char> = secret.chars().collect();
    for w in chars.windows(6) {
        let w: String = w.iter().collect();
        assert!(!excerpt.contains(&w), "excerpt {excerpt:?} leaks {w:?}");
    }
    assert!(excerpt.chars().count() <= MAX_EXCERPT_CHARS);
}

fn expect_none(g: &EgressGuard, text: &str) {
    let found = g.scan(text);
    assert!(found.is_empty(), "{text:?}: {found:#?}");
}

fn expect_not(g: &EgressGuard, text: &str, rule: &str) {
    assert!(
        !rules(g, text).iter().any(|r| r == rule),
        "{rule} in {text:?}"
    );
}

// -- entropy and Luhn ---------------------------------------------------

#[test]
fn entropy_of_known_strings() {
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(shannon_entropy(""), 0.0));
    assert!(close(shannon_entropy("aaaa"), 0.0));
    assert!(close(shannon_entropy("ab"), 1.0));
    assert!(close(shannon_entropy("aabb"), 1.0));
    assert!(close(shannon_entropy("abcd"), 2.0));
    assert!(close(shannon_entropy("0123456789abcdef"), 4.0));
    assert!(
        close(shannon_entropy("ééaa"), 1.0),
        "counts chars, not bytes"
    );
    assert!(close(
        shannon_entropy("日本語日本語日本語日本語"),
        3f64.log2()
    ));
    assert!(shannon_entropy(&fake_from(B64, 4096, 1)) > 5.9);
}

#[test]
fn luhn_known_numbers() {
    assert!(luhn_valid("4242 4242 4242 4242"));
    assert!(luhn_valid("4242-4242-4242-4242"));
    assert!(luhn_valid("4242424242424242"));
    assert!(luhn_valid("79927398713"));
    assert!(luhn_valid("3782 822463 10005"));
    assert!(!luhn_valid("4242 4242 4242 4241"));
    assert!(!luhn_valid("79927398710"));
    assert!(!luhn_valid(""));
    assert!(!luhn_valid("0"));
    assert!(!luhn_valid("4242x4242424242424242"));
    assert!(!luhn_valid("４２４２"), "fullwidth digits are not digits");
}

// -- construction -------------------------------------------------------

#[test]
fn new_rejects_bad_settings() {
    let mut c = config(&[]);
    c.entropy_bits = f64::NAN;
    assert!(matches!(EgressGuard::new(&c), Err(DetectError::Guard(_))));
    c.entropy_bits = -1.0;
    assert!(EgressGuard::new(&c).is_err());
    let mut c = config(&[]);
    c.entropy_min_len = 0;
    assert!(EgressGuard::new(&c).is_err());
    // Empty canaries are ignored, not matched everywhere.
    let g = EgressGuard::new(&config(&["", "PCY-CANARY-0001"])).unwrap();
    expect_none(&g, "hello world");
}

#[test]
fn rule_ids_are_namespaced_and_listed() {
    let ids = rule_ids();
    assert!(ids.iter().all(|r| r.starts_with("egress.")));
    for r in [
        "egress.canary",
        "egress.private_key",
        "egress.github_token",
        "egress.high_entropy",
        "egress.email",
        "egress.phone",
        "egress.payment_card",
    ] {
        assert!(ids.contains(&r), "{r}");
    }
    assert!(!ids.contains(&"egress.stripe_publishable_key"));
}

// -- secret formats -----------------------------------------------------

#[test]
fn openai_keys() {
    let g = guard();
    for prefix in ["sk-", "sk-proj-", "sk-svcacct-", "sk-admin-"] {
        let key = format!("{prefix}{}", fake(48, 11));
        let f = expect_one(
            &g,
            &format!("OPENAI_API_KEY={key}\n"),
            "egress.openai_key",
            &key,
        );
        assert_eq!(f.category, "secret");
        assert_eq!(f.severity, Severity::High);
        assert!(f.excerpt.starts_with("sk-…[REDACTED "), "{}", f.excerpt);
    }
    expect_none(
        &g,
        "see the task-list-for-the-sprint-planning-session-2026 page",
    );
    expect_none(&g, "sk-this-is-just-a-long-hyphenated-phrase-for-docs");
    expect_not(
        &g,
        "disk-Space-Usage-Report-1234567890abc",
        "egress.openai_key",
    );
    expect_none(&g, "sk-short1A");
}

#[test]
fn anthropic_keys() {
    let g = guard();
    let key = format!("sk-ant-api03-{}AA", fake(93, 12));
    let f = expect_one(&g, &format!("key: \"{key}\""), "egress.anthropic_key", &key);
    assert_eq!(f.severity, Severity::High);
    let key = format!("sk-ant-{}", fake(40, 13));
    expect_one(&g, &format!("{key} "), "egress.anthropic_key", &key);
    expect_none(&g, "an sk-ant-colony of insects");
    expect_none(&g, "the task-ant-farm-simulation-with-many-words");
}

#[test]
fn aws_access_key_ids() {
    let g = guard();
    for prefix in ["AKIA", "ASIA"] {
        let id = format!("{prefix}{}", fake_from(UPPER_ALNUM, 16, 14));
        let f = expect_one(
            &g,
            &format!("aws_access_key_id = {id}"),
            "egress.aws_access_key_id",
            &id,
        );
        assert!(f.excerpt.starts_with(prefix), "{}", f.excerpt);
    }
    expect_none(&g, "The AKIA prefix marks long-term AWS access keys.");
    let doc = format!("AKIA{}EXAMPLE", "IOSFODNN7");
    expect_none(&g, &format!("aws_access_key_id = {doc}"));
    // Embedded in a longer upper-case word: not a key id.
    expect_none(&g, &format!("XAKIA{}", "ABCDEFGHIJKLMNOP"));
    expect_none(&g, &format!("AKIA{}Q", "ABCDEFGHIJKLMNOP"));
}

#[test]
fn aws_secret_access_keys() {
    let g = guard();
    let secret = format!("{}/{}+{}", fake(20, 15), fake(9, 16), fake(9, 17));
    assert_eq!(secret.len(), 40);
    let rule = "egress.aws_secret_access_key";
    expect_one(
        &g,
        &format!("aws_secret_access_key = {secret}\n"),
        rule,
        &secret,
    );
    expect_one(
        &g,
        &format!("AWS_SECRET_ACCESS_KEY={secret}"),
        rule,
        &secret,
    );
    expect_one(
        &g,
        &format!("{{\"SecretAccessKey\": \"{secret}\"}}"),
        rule,
        &secret,
    );
    let f = expect_one(&g, &format!("secret: {secret}"), rule, &secret);
    assert_eq!(f.excerpt, "[REDACTED 40 chars]");
    // Without context it is at most a generic high-entropy token.
    expect_not(&g, &format!("value {secret}"), rule);
    // A git SHA after `secret` is not an AWS secret (no upper case, 4 bits/char).
    expect_none(&g, "secret = 9fceb02d0ae598e95dc970b74767f19372d61af8");
    // 41 chars is not a 40-char key.
    expect_not(&g, &format!("secret = {secret}Z"), rule);
    let doc = format!("wJalrXUtnFEMI/K7MDENG/bPxRfiCY{}", "EXAMPLEKEY");
    expect_none(&g, &format!("aws_secret_access_key = {doc}"));
    expect_none(&g, "the secretary said: hello");
}

#[test]
fn google_api_keys() {
    let g = guard();
    let key = format!("AIza{}", fake(35, 18));
    let f = expect_one(
        &g,
        &format!("https://x.googleapis.com/v1?key={key}&q=1"),
        "egress.google_api_key",
        &key,
    );
    assert!(f.excerpt.starts_with("AIza…"));
    expect_none(&g, &format!("AIza{}", fake(20, 19)));
    expect_none(&g, "AIzawesome library");
}

#[test]
fn github_tokens_of_every_prefix() {
    let g = guard();
    for prefix in ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"] {
        let tok = format!("{prefix}{}", fake(36, 20));
        let f = expect_one(&g, &format!("token {tok} end"), "egress.github_token", &tok);
        assert_eq!(f.excerpt, format!("{prefix}…[REDACTED 36 chars]"));
    }
    let pat = format!("github_pat_{}_{}", fake(22, 21), fake(59, 22));
    expect_one(&g, &format!("GH_TOKEN={pat}"), "egress.github_token", &pat);
    let tok = format!("ghp_{}", "A".repeat(36));
    expect_one(&g, &format!("\"{tok}\""), "egress.github_token", &tok);
    expect_none(&g, "ghp_short and github_pat_short");
    expect_none(&g, &format!("sghp_{}", "A".repeat(36)));
}

#[test]
fn slack_tokens_and_webhooks() {
    let g = guard();
    for p in ["xoxb", "xoxp", "xoxa", "xoxr", "xoxs"] {
        let tok = format!("{p}-123456789012-1234567890123-{}", fake(24, 23));
        expect_one(&g, &format!("SLACK={tok}"), "egress.slack_token", &tok);
    }
    let hook = format!(
        "https://hooks.slack.com/services/T{}/B{}/{}",
        fake_from(UPPER_ALNUM, 8, 24),
        fake_from(UPPER_ALNUM, 10, 25),
        fake(24, 26)
    );
    let f = expect_one(
        &g,
        &format!("post to {hook} now"),
        "egress.slack_webhook",
        &hook,
    );
    assert!(f.excerpt.starts_with("http…"));
    expect_none(&g, "xoxb-style-tokens-are-used-by-bots");
    expect_none(&g, "see https://hooks.slack.com/services/ for details");
}

#[test]
fn stripe_keys_and_publishable_keys() {
    let g = guard();
    for p in ["sk_live_", "sk_test_", "rk_live_"] {
        let key = format!("{p}{}", fake(24, 27));
        expect_one(&g, &format!("stripe: {key}"), "egress.stripe_key", &key);
    }
    // Publishable keys are public: no finding at all, not even high entropy.
    let pk = format!("pk_live_{}", fake(99, 28));
    expect_none(&g, &format!("Stripe('{pk}')"));
    expect_none(&g, "sk_live_short");
}

#[test]
fn pem_private_keys() {
    let g = guard();
    let body = (0..6)
        .map(|i| fake_from(B64, 64, 30 + i))
        .collect::<Vec<_>>()
        .join("\n");
    let block = format!("-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----");
    let f = expect_one(
        &g,
        &format!("id_rsa:\n{block}\ntrailing"),
        "egress.private_key",
        &block,
    );
    assert_eq!(f.severity, Severity::Critical);
    assert!(f
        .excerpt
        .starts_with("-----BEGIN RSA PRIVATE KEY-----…[REDACTED "));
    assert_no_leak(&f.excerpt, &body);

    for kind in ["", "EC ", "OPENSSH ", "ENCRYPTED "] {
        let block =
            format!("-----BEGIN {kind}PRIVATE KEY-----\\n{body}\\n-----END {kind}PRIVATE KEY-----");
        expect_one(
            &g,
            &format!("{{\"k\":\"{block}\"}}"),
            "egress.private_key",
            &block,
        );
    }

    // No END line (truncated output): header plus the base64 lines after it.
    let truncated = format!("-----BEGIN PRIVATE KEY-----\n{body}");
    let text = format!("{truncated}\n... output truncated");
    let f = expect_one(&g, &text, "egress.private_key", &truncated);
    assert_no_leak(&f.excerpt, &body);
    // Header alone.
    let f = expect_one(
        &g,
        "-----BEGIN PRIVATE KEY----- goes first",
        "egress.private_key",
        "-----BEGIN PRIVATE KEY-----",
    );
    assert_eq!(f.excerpt, "-----BEGIN PRIVATE KEY-----");

    expect_none(
        &g,
        "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
    );
    expect_none(&g, "-----BEGIN CERTIFICATE-----");
}

#[test]
fn jwts() {
    let g = guard();
    let jwt = format!(
        "eyJhbGciOiJIUzI1NiJ9.eyJ{}.{}",
        fake(40, 40),
        fake_from(ALNUM, 43, 41)
    );
    let f = expect_one(&g, &format!("token={jwt};"), "egress.jwt", &jwt);
    assert!(f.excerpt.starts_with("eyJ…"));
    expect_none(&g, "eyJhbGciOiJIUzI1NiJ9");
    expect_none(&g, "eyJ.a.b and eyJabc.def.ghi");
}

#[test]
fn bearer_tokens() {
    let g = guard();
    let tok = fake(32, 42);
    let f = expect_one(
        &g,
        &format!("Authorization: Bearer {tok}\r\n"),
        "egress.bearer_token",
        &tok,
    );
    assert_eq!(f.excerpt, "[REDACTED 32 chars]");
    expect_one(
        &g,
        &format!("curl -H 'authorization: bearer {tok}'"),
        "egress.bearer_token",
        &tok,
    );
    // A JWT or a known format behind `Bearer` is reported as that format only.
    let jwt = format!("eyJhbGciOiJIUzI1NiJ9.eyJ{}.{}", fake(20, 43), fake(43, 44));
    expect_one(
        &g,
        &format!("Authorization: Bearer {jwt}"),
        "egress.jwt",
        &jwt,
    );
    let gh = format!("ghp_{}", fake(36, 45));
    expect_one(
        &g,
        &format!("Authorization: Bearer {gh}"),
        "egress.github_token",
        &gh,
    );

    expect_none(&g, "bearer bonds are financial instruments");
    expect_none(&g, "Authorization: Bearer YOUR_ACCESS_TOKEN_HERE");
    expect_none(&g, "Authorization: Bearer <token>");
    expect_none(&g, "the forbearer 0123456789abcdefXY");
}

#[test]
fn url_passwords() {
    let g = guard();
    let pw = fake(16, 46);
    let f = expect_one(
        &g,
        &format!("DATABASE_URL=postgres://app:{pw}@db.internal:5432/prod"),
        "egress.url_password",
        &pw,
    );
    assert_eq!(f.excerpt, "[REDACTED 16 chars]");
    expect_none(&g, "postgres://user:password@localhost/db");
    expect_none(&g, "redis://:${REDIS_PASSWORD}@cache:6379");
    expect_none(&g, "https://example.com:8080/path?a=b");
}

#[test]
fn canaries_are_exact_and_case_sensitive() {
    let canary = format!("PCY-CANARY-{}", "7f3a9c21");
    let g = EgressGuard::new(&config(&["other-canary-0001", &canary])).unwrap();
    let f = expect_one(&g, &format!("note: {canary}."), "egress.canary", &canary);
    assert_eq!(f.category, "canary");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.excerpt, "[REDACTED canary #2, 19 chars]");
    expect_none(&g, &canary.to_lowercase());
    expect_none(&g, "PCY-CANARY-7f3a9c2");
    // A canary shaped like an AWS key id is reported once, as the canary.
    let aws_like = format!("AKIA{}", fake_from(UPPER_ALNUM, 16, 47));
    let g = EgressGuard::new(&config(&[&aws_like])).unwrap();
    expect_one(&g, &format!("id={aws_like}"), "egress.canary", &aws_like);
    // Inside a long random token: the canary wins over high entropy.
    let c2 = fake(12, 48);
    let g = EgressGuard::new(&config(&[&c2])).unwrap();
    let text = format!("x {}{c2}{} y", fake(30, 49), fake(30, 50));
    assert_eq!(rules(&g, &text), ["egress.canary"]);
}

#[test]
fn high_entropy_tokens() {
    let g = guard();
    let tok = fake_from(B64, 48, 51);
    let f = expect_one(&g, &format!("blob: {tok} end"), "egress.high_entropy", &tok);
    assert_eq!(f.category, "high_entropy");
    assert_eq!(f.severity, Severity::Low);
    assert!(
        f.excerpt.starts_with("[REDACTED 48 chars, "),
        "{}",
        f.excerpt
    );
    // Hex (git SHAs, sha256) and UUIDs stay under 4.5 bits per char.
    expect_none(&g, "commit 9fceb02d0ae598e95dc970b74767f19372d61af8");
    expect_none(
        &g,
        "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    );
    expect_none(&g, "id 123e4567-e89b-12d3-a456-426614174000");
    // Base64 of a short word, long words, paths.
    expect_none(&g, "aGVsbG8= and d29ybGQ=");
    expect_none(&g, "/usr/local/lib/python3/site-packages/requests/adapters");
    // Temporary folders: the whole path looks random, its components do not
    // (4.74 and 4.54 bits per character as one run).
    expect_none(&g, "/var/folders/xy/8k2j3h4g5f6d7s8a9/T/tmpabc123/file");
    expect_none(
        &g,
        "/tmp/portcullis-real-servers-7jkr5xgf/filesystem/data/README.md",
    );
    use base64::Engine as _;
    // Base64 of text is that text: a PDF's header (server-pdf's read_pdf_bytes)
    // passes, the Base64 of a text holding a secret is still reported.
    expect_none(
        &g,
        "JVBERi0xLjQKMSAwIG9iago8PCAvVHlwZSAvQ2F0YWxvZyAvUGFnZXMgMiAwIFIgPj4KZW5kb2Jq",
    );
    let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
    let leak = b64(&format!("token = ghp_{}", fake(36, 60)));
    expect_one(&g, &leak, "egress.high_entropy", &leak);
    // Base64 of binary data: a short run may be a key, a long one is a file.
    let bytes: Vec<u8> = (0..6000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let short = base64::engine::general_purpose::STANDARD.encode(&bytes[..48]);
    expect_one(&g, &short, "egress.high_entropy", &short);
    let file = base64::engine::general_purpose::STANDARD.encode(&bytes);
    expect_none(&g, &file);
    // A random component of a path is still one, and is what is reported.
    let part = fake_from(ALNUM, 48, 52);
    let path = format!("/srv/keys/{part}/current");
    expect_one(&g, &path, "egress.high_entropy", &part);
    expect_none(&g, "antidisestablishmentarianism_and_supercalifragilistic");
    expect_none(&g, &"ab".repeat(40));
    // Known secret formats win over high entropy on the same region.
    let key = format!("sk-proj-{}", fake(64, 52));
    assert_eq!(rules(&g, &key), ["egress.openai_key"]);
    // The configured threshold and length are honoured.
    let mut c = config(&[]);
    c.entropy_min_len = 64;
    expect_none(&EgressGuard::new(&c).unwrap(), &tok);
    let mut c = config(&[]);
    c.entropy_bits = 3.5;
    let sha = "9fceb02d0ae598e95dc970b74767f19372d61af8";
    assert_eq!(
        rules(&EgressGuard::new(&c).unwrap(), sha),
        ["egress.high_entropy"]
    );
}

// -- PII ----------------------------------------------------------------

#[test]
fn emails() {
    let g = guard();
    let f = expect_one(
        &g,
        "contact jane.doe@acme-corp.io today",
        "egress.email",
        "jane.doe@acme-corp.io",
    );
    assert_eq!(f.category, "pii");
    assert_eq!(f.severity, Severity::Low);
    assert_eq!(f.excerpt, "j***@acme-corp.io");
    expect_one(
        &g,
        "<mailto:bob+tag@mail.acme.co.uk>",
        "egress.email",
        "bob+tag@mail.acme.co.uk",
    );
    // Placeholders and look-alikes.
    expect_none(&g, "write to user@example.com or admin@mail.example.org");
    expect_none(&g, "ping root@host.localhost, a@b.test");
    expect_none(&g, "<img src=\"icon@2x.png\">");
    expect_none(&g, "npm i lodash@4.17.21 and @types/node@20");
    expect_none(&g, "git clone git@github.com:owner/repo.git");
    expect_none(&g, "https://deploy@registry.acme-corp.io/v2/");
    expect_none(&g, "thanks @jane for the review");
}

#[test]
fn phone_numbers() {
    let g = guard();
    let f = expect_one(
        &g,
        "call +1 415 555 2671 now",
        "egress.phone",
        "+1 415 555 2671",
    );
    assert_eq!(f.excerpt, "+1 *** *** 2671");
    let f = expect_one(&g, "tel:+14155552671", "egress.phone", "+14155552671");
    assert_eq!(f.excerpt, "+*******2671");
    expect_one(
        &g,
        "phone: (415) 555-2671.",
        "egress.phone",
        "(415) 555-2671",
    );
    expect_one(&g, "415-555-2671", "egress.phone", "415-555-2671");
    expect_one(&g, "or 415.555.2671", "egress.phone", "415.555.2671");
    expect_one(&g, "+1 (415) 555-2671", "egress.phone", "+1 (415) 555-2671");
    expect_one(
        &g,
        "UK +44 20 7946 0958",
        "egress.phone",
        "+44 20 7946 0958",
    );
    expect_one(&g, "FR 06 12 34 56 78", "egress.phone", "06 12 34 56 78");
    expect_one(&g, "DE 030 12345678", "egress.phone", "030 12345678");
    expect_one(&g, "UK 020 7946 0958", "egress.phone", "020 7946 0958");

    for benign in [
        "released on 2026-11-29",
        "at 2026-11-29T10:15:30Z and 2026-11-29T10:15:30+01:00",
        "version 1.2.3.4 of 10.0.0.1 and 192.168.100.200",
        "order 123456 shipped",
        "due 01.02.2026 10:30 and 29/11/2026 08:00",
        "3+4=7 and x+1234",
        "v0.12.3 and 0.123456789",
        "build 20261129.101530",
    ] {
        expect_none(&g, benign);
    }
}

#[test]
fn payment_cards() {
    let g = guard();
    let f = expect_one(
        &g,
        "card 4242 4242 4242 4242 exp 12/30",
        "egress.payment_card",
        "4242 4242 4242 4242",
    );
    assert_eq!(f.excerpt, "**** **** **** 4242");
    assert_eq!(f.category, "pii");
    expect_one(
        &g,
        "4242-4242-4242-4242",
        "egress.payment_card",
        "4242-4242-4242-4242",
    );
    let f = expect_one(
        &g,
        "pan=4242424242424242;",
        "egress.payment_card",
        "4242424242424242",
    );
    assert_eq!(f.excerpt, "************4242");
    expect_one(
        &g,
        "amex 3782 822463 10005",
        "egress.payment_card",
        "3782 822463 10005",
    );
    expect_one(
        &g,
        "mc 5555555555554444",
        "egress.payment_card",
        "5555555555554444",
    );

    expect_none(&g, "card 4242 4242 4242 4241");
    expect_none(&g, "order 4242424242424241");
    // Luhn-valid, but no card network starts with 1: an order number / timestamp.
    assert!(luhn_valid("1234567890123452"));
    expect_none(&g, "order 1234567890123452");
    expect_none(&g, "ts 1732838400000 ms");
    expect_none(&g, "4242 4242-4242 4242");
}

// -- overlaps, ordering, masking ------------------------------------------

#[test]
fn findings_are_sorted_and_deduplicated() {
    let g = guard();
    let gh = format!("ghp_{}", fake(36, 60));
    let aws = format!("{}/{}", fake(30, 61), fake(9, 62));
    let text = format!(
        "mail jane@acme-corp.io, key AWS_SECRET_ACCESS_KEY={aws}\ntoken {gh} card 4242424242424242"
    );
    let found = g.scan(&text);
    let names: Vec<&str> = found.iter().map(|f| f.rule.as_str()).collect();
    assert_eq!(
        names,
        [
            "egress.email",
            "egress.aws_secret_access_key",
            "egress.github_token",
            "egress.payment_card"
        ]
    );
    assert!(found.windows(2).all(|w| w[0].span.start <= w[1].span.start));
    for f in &found {
        assert!(text.is_char_boundary(f.span.start) && text.is_char_boundary(f.span.end));
        assert_eq!(f.view, "original");
    }
}

#[test]
fn mask_round_trip() {
    let g = guard();
    let gh = format!("ghp_{}", fake(36, 70));
    let canary = format!("CANARY-{}", "c0ffee99");
    let g2 = EgressGuard::new(&config(&[&canary])).unwrap();
    let text = format!(
        "Ünïcode ✓ token={gh} by jane.doe@acme-corp.io card 4242 4242 4242 4242 {canary} 🎉"
    );
    let found = g2.scan(&text);
    assert_eq!(found.len(), 4, "{found:#?}");

    let masked = EgressGuard::mask(&text, &found, true, true);
    assert!(!masked.contains(&gh) && !masked.contains(&canary));
    assert!(!masked.contains("jane.doe") && !masked.contains("4242 4242"));
    for p in [
        "[REDACTED:github_token]",
        "[REDACTED:email]",
        "[REDACTED:payment_card]",
        "[REDACTED:canary]",
    ] {
        assert!(masked.contains(p), "{p} in {masked}");
    }
    assert!(masked.starts_with("Ünïcode ✓ token=") && masked.ends_with(" 🎉"));
    assert!(g.scan(&masked).is_empty(), "{masked}");

    // Secrets only / PII only / nothing.
    let s = EgressGuard::mask(&text, &found, true, false);
    assert!(!s.contains(&gh) && s.contains("jane.doe@acme-corp.io"));
    let p = EgressGuard::mask(&text, &found, false, true);
    assert!(p.contains(&gh) && !p.contains("jane.doe"));
    assert_eq!(EgressGuard::mask(&text, &found, false, false), text);
    assert_eq!(EgressGuard::mask(&text, &[], true, true), text);

    // Allowlisted findings are left alone.
    let mut allowed = found.clone();
    for f in &mut allowed {
        f.allowlisted = true;
    }
    assert_eq!(EgressGuard::mask(&text, &allowed, true, true), text);
}

#[test]
fn mask_handles_overlaps_disorder_and_bad_spans() {
    let text = "abc ✓ secret-value-here and more ✓ tail";
    let mk = |rule: &str, cat: &str, sev: Severity, start: usize, end: usize| Finding {
        rule: rule.into(),
        category: cat.into(),
        severity: sev,
        view: "original".into(),
        span: Span { start, end },
        excerpt: String::new(),
        path: None,
        allowlisted: false,
    };
    let s = text.find("secret").unwrap();
    let e = s + "secret-value-here".len();
    let findings = vec![
        mk(
            "egress.high_entropy",
            "high_entropy",
            Severity::Low,
            s + 3,
            e + 4,
        ),
        mk("egress.github_token", "secret", Severity::High, s, e),
        mk("egress.email", "pii", Severity::Low, s + 2, s + 5),
        // Inside the multi-byte check mark: widened to the whole char.
        mk("egress.phone", "pii", Severity::Low, 5, 6),
        // Out of range and inverted spans.
        mk("egress.canary", "canary", Severity::Critical, 1000, 2000),
        mk("egress.canary", "canary", Severity::Critical, 9, 3),
        // Other categories are not masked.
        mk("io.ignore_previous", "injection", Severity::High, 0, 3),
    ];
    let masked = EgressGuard::mask(text, &findings, true, true);
    assert_eq!(
        masked,
        "abc [REDACTED:phone] [REDACTED:github_token] more ✓ tail"
    );
    let mut rev = findings.clone();
    rev.reverse();
    assert_eq!(EgressGuard::mask(text, &rev, true, true), masked);
    // A whole-text span and a span ending past the end.
    let all = [mk("egress.jwt", "secret", Severity::High, 0, usize::MAX)];
    assert_eq!(EgressGuard::mask(text, &all, true, true), "[REDACTED:jwt]");
    let odd = [mk("egress.we!rd rule", "secret", Severity::High, 0, 3)];
    assert!(EgressGuard::mask(text, &odd, true, true).starts_with("[REDACTED:werdrule] "));
}

#[test]
fn never_panics_on_arbitrary_unicode() {
    let canary = format!("ÄÖÜ-canary-{}", "ß✓");
    let g = EgressGuard::new(&config(&[&canary])).unwrap();
    let gh = format!("ghp_{}", fake(36, 80));
    let text = format!(
        "é{gh}é 日本語+1 415 555 2671日本 ✓{canary}✓ 4242 4242 4242 4242\u{202e}x@acme-corp.io\u{200b}\
         -----BEGIN PRIVATE KEY-----\u{0}\n{}\n🎉 Bearer {} 𝐢",
        fake_from(B64, 64, 81),
        fake(40, 82)
    );
    // Every char-boundary substring starting at a few offsets, and every prefix.
    let bounds: Vec<usize> = (0..=text.len())
        .filter(|&i| text.is_char_boundary(i))
        .collect();
    for &a in bounds.iter().step_by(7) {
        for &b in bounds.iter().filter(|&&b| b >= a).step_by(5) {
            let sub = &text[a..b];
            let found = g.scan(sub);
            for f in &found {
                assert!(f.span.start < f.span.end && f.span.end <= sub.len());
                assert!(sub.is_char_boundary(f.span.start) && sub.is_char_boundary(f.span.end));
            }
            let _ = EgressGuard::mask(sub, &found, true, true);
        }
    }
    let found = g.scan(&text);
    let names: Vec<&str> = found.iter().map(|f| f.rule.as_str()).collect();
    for r in [
        "egress.canary",
        "egress.phone",
        "egress.payment_card",
        "egress.email",
        "egress.private_key",
        "egress.bearer_token",
    ] {
        assert!(names.contains(&r), "{r} in {names:?}");
    }
    // `éghp_…`: é is not an ASCII token char, so the token is still found.
    assert!(names.contains(&"egress.github_token"), "{names:?}");
    let masked = EgressGuard::mask(&text, &found, true, true);
    assert!(!masked.contains(&gh) && !masked.contains(&canary));
}

#[test]
fn excerpts_never_contain_secrets() {
    let canary = format!("CANARY-{}", fake(16, 90));
    let g = EgressGuard::new(&config(&[&canary])).unwrap();
    let secrets = [
        format!("sk-proj-{}", fake(60, 91)),
        format!("sk-ant-api03-{}", fake(90, 92)),
        format!("AKIA{}", fake_from(UPPER_ALNUM, 16, 93)),
        format!("AIza{}", fake(35, 94)),
        format!("ghs_{}", fake(36, 95)),
        format!("github_pat_{}_{}", fake(22, 96), fake(59, 97)),
        format!("xoxp-1234-5678-{}", fake(30, 98)),
        format!(
            "hooks.slack.com/services/T{}/B{}/{}",
            fake(8, 99),
            fake(8, 100),
            fake(24, 101)
        ),
        format!("rk_live_{}", fake(30, 102)),
        format!(
            "eyJ{}.eyJ{}.{}",
            fake(20, 103),
            fake(30, 104),
            fake(43, 105)
        ),
        fake_from(B64, 50, 106),
        canary.clone(),
    ];
    for s in &secrets {
        let text = format!("value: {s} ");
        let found = g.scan(&text);
        assert_eq!(found.len(), 1, "{s}: {found:#?}");
        assert_no_leak(&found[0].excerpt, s);
        assert!(!EgressGuard::mask(&text, &found, true, false).contains(s.as_str()));
    }
    let bearer = fake(40, 107);
    let aws = format!("{}+{}", fake(20, 108), fake(19, 109));
    let pw = fake(20, 110);
    let text = format!(
        "Authorization: Bearer {bearer}\naws_secret_access_key={aws}\nmysql://root:{pw}@db/x"
    );
    let found = g.scan(&text);
    assert_eq!(found.len(), 3, "{found:#?}");
    for (f, s) in found.iter().zip([&bearer, &aws, &pw]) {
        assert_no_leak(&f.excerpt, s);
    }
    // PII excerpts keep only the masked form.
    let found = g.scan("x jonathan.smith@acme-corp.io +44 20 7946 0958 5555 5555 5555 4444");
    let ex: Vec<&str> = found.iter().map(|f| f.excerpt.as_str()).collect();
    assert_eq!(
        ex,
        [
            "j***@acme-corp.io",
            "+44 ** **** 0958",
            "**** **** **** 4444"
        ]
    );
}

#[test]
fn benign_text_has_no_findings() {
    let g = guard();
    let text = "The quick brown fox jumps over the lazy dog. In 2026 we shipped \
        version 1.4.2 (commit 9fceb02d0ae598e95dc970b74767f19372d61af8) to 1,234 users; \
        see https://docs.acme-corp.io/guide/getting-started#install and run \
        `cargo test --workspace`. Meeting on 2026-11-29 at 10:30, room 4B. ";
    expect_none(&g, &text.repeat(4));
}

#[test]
fn formats_file_negatives_fire_nothing_of_their_rule() {
    let g = guard();
    assert!(NEGATIVES.len() >= 10, "{}", NEGATIVES.len());
    for (rule, text) in NEGATIVES {
        expect_not(&g, text, rule);
    }
}

#[test]
fn formats_file_is_the_table_the_guard_runs() {
    let text = include_str!("../../../../rules/egress/formats.toml");
    let table = super::format_table::rust_table(text, "formats.toml").unwrap();
    assert_eq!(table.matches("    Spec {").count(), SPECS.len());
    for s in SPECS {
        assert!(
            table.contains(&format!("pattern: {:?}", s.pattern)),
            "{}",
            s.rule
        );
    }
}

#[test]
fn a_bad_formats_file_is_refused_with_its_line() {
    let good = "version = 1\n\n[[format]]\nrule = \"egress.x\"\npattern = 'x[0-9]{4}'\n\
                kind = \"secret\"\nseverity = \"high\"\nrank = 80\nedge = \"token\"\n\
                check = \"any\"\nshow = \"prefix\"\nshow_chars = 1\n";
    assert!(super::format_table::rust_table(good, "f.toml").is_ok());
    let second = format!("{good}\n{}", good.replacen("version = 1\n\n", "", 1));
    for (from, to, expect) in [
        (
            "kind = \"secret\"",
            "kind = \"secrett\"",
            "kind = \"secrett\" is not one of",
        ),
        ("pattern = 'x[0-9]{4}'", "pattern = 'x[0-9'", "pattern:"),
        ("rank = 80", "rank = 100", "rank 100 is not between"),
        (
            "rule = \"egress.x\"",
            "rule = \"x\"",
            "start with `egress.`",
        ),
        ("show_chars = 1\n", "", "needs show_chars"),
        ("check = \"any\"", "check = \"luhn\"", "check = \"luhn\""),
    ] {
        // The second [[format]] is the bad one: the error names its line, 14.
        let pos = second.rfind(from).unwrap();
        let bad = format!("{}{to}{}", &second[..pos], &second[pos + from.len()..]);
        let err = super::format_table::rust_table(&bad, "f.toml").unwrap_err();
        assert!(err.starts_with("f.toml:14: "), "{err}");
        assert!(err.contains(expect), "{err}");
    }
    let err = super::format_table::rust_table(&good.replace("rank", "rnak"), "f.toml").unwrap_err();
    assert!(err.contains("f.toml") && err.contains("line 8"), "{err}");
}
