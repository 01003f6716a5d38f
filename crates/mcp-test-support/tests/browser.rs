//! The WebDriver harness against a real headless Chromium (Debian's
//! `chromium` and `chromium-driver`; a machine without them fails here,
//! naming the packages), on pages served by `serve_page`.

use std::{path::Path, process::Command, time::Duration};

use mcp_test_support::browser::{Browser, Key, WebDriverError, serve_page};
use serde_json::json;

/// Generous bound for anything the page does on a slow, busy machine.
const WITHIN: Duration = Duration::from_secs(10);

/// A button that counts its clicks, an input, a button that fails, a dark style, an error in
/// the console and a script error before the body is parsed (to show the
/// hook is there before the page's first script).
const PAGE: &str = r#"<!doctype html>
<html>
<head>
<meta charset="utf-8">
<title>harness page</title>
<meta http-equiv="Content-Security-Policy" content="img-src 'none'">
<style>
  body { background: rgb(255, 255, 255); }
  @media (prefers-color-scheme: dark) { body { background: rgb(0, 0, 0); } }
</style>
<script>throw new Error("early");</script>
</head>
<body>
<button id="go">Go</button>
<p id="out">not clicked</p>
<input id="name">
<button id="fail">Fail</button>
<script>
  let clicks = 0;
  document.getElementById("go").addEventListener("click", () => {
    clicks += 1;
    document.getElementById("out").textContent = `clicked ${clicks}`;
  });
  document.getElementById("fail").addEventListener("click", () => {
    Promise.reject(new Error("nobody waits"));
    const img = document.createElement("img");
    img.src = "/blocked.png";
    document.body.append(img);
  });
  console.error("boom");
  document.cookie = "flavour=plain; SameSite=Strict";
</script>
</body>
</html>"#;

async fn open_page(browser: &Browser, html: &str) -> mcp_test_support::browser::ServedPage {
    let page = serve_page(html.to_owned()).await.unwrap();
    browser.goto(&page.url()).await.unwrap();
    page
}

/// Pids of live processes whose command line mentions the browser's
/// profile, by `pgrep` (independent of the harness's own sweep).
fn processes_of(profile: &Path) -> Vec<String> {
    let output = Command::new("pgrep")
        .arg("-f")
        .arg(profile.as_os_str())
        .output()
        .expect("running pgrep");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|pid| {
            let ps = Command::new("ps")
                .args(["-o", "pid,ppid,stat,args", "-p", pid])
                .output()
                .unwrap();
            String::from_utf8_lossy(&ps.stdout).into_owned()
        })
        .collect()
}

#[tokio::test]
async fn a_page_is_driven_like_a_user() {
    let browser = Browser::start().await.unwrap();
    let page = open_page(&browser, PAGE).await;
    assert_eq!(browser.title().await.unwrap(), "harness page");
    assert_eq!(browser.current_url().await.unwrap(), page.url());
    assert!(browser.source().await.unwrap().contains(r#"<p id="out">"#));

    browser.click("#go").await.unwrap();
    assert_eq!(browser.text("#out").await.unwrap(), "clicked 1");

    browser.send_keys("#name", "ada").await.unwrap();
    let name = browser.find("#name").await.unwrap();
    assert_eq!(name.property("value").await.unwrap(), json!("ada"));
    assert_eq!(name.attribute("id").await.unwrap().as_deref(), Some("name"));
    assert_eq!(name.attribute("title").await.unwrap(), None);
    assert!(name.is_displayed().await.unwrap());
    let echoed = browser
        .execute(
            "return arguments[0].value + arguments[1];",
            vec![name.as_arg(), json!("!")],
        )
        .await
        .unwrap();
    assert_eq!(echoed, json!("ada!"));
    let later = browser
        .execute_async(
            "const done = arguments[0]; setTimeout(() => done('later'), 10);",
            Vec::new(),
        )
        .await
        .unwrap();
    assert_eq!(later, json!("later"));
    assert_eq!(browser.find_all("button, input").await.unwrap().len(), 3);
    assert!(browser.find_all("table").await.unwrap().is_empty());

    let cookies = browser.cookies().await.unwrap();
    let flavour = cookies.iter().find(|c| c.name == "flavour").unwrap();
    assert_eq!(flavour.value, "plain");
    assert_eq!(flavour.same_site.as_deref(), Some("Strict"));
    assert!(!flavour.http_only);

    browser.quit().await.unwrap();
}

/// Tab moves the focus from the page to the button, Enter activates it.
#[tokio::test]
async fn the_keyboard_reaches_and_activates_a_button() {
    let browser = Browser::start().await.unwrap();
    let _page = open_page(&browser, PAGE).await;
    browser.press_keys(&Key::Tab.to_string()).await.unwrap();
    let focused = browser
        .execute("return document.activeElement.id;", Vec::new())
        .await
        .unwrap();
    assert_eq!(focused, json!("go"));
    browser.press_keys(&Key::Enter.to_string()).await.unwrap();
    browser
        .wait_for(
            "document.getElementById('out').textContent === 'clicked 1'",
            WITHIN,
        )
        .await
        .unwrap();
    // Tab to the input, type, and Shift+Tab back to the button.
    browser
        .press_keys(&format!("{}hi", Key::Tab))
        .await
        .unwrap();
    let typed = browser.find("#name").await.unwrap().property("value").await;
    assert_eq!(typed.unwrap(), json!("hi"));
    browser.press_chord(&[Key::Shift, Key::Tab]).await.unwrap();
    browser.press_keys(&Key::Enter.to_string()).await.unwrap();
    assert_eq!(
        browser
            .wait_for(
                "document.getElementById('out').textContent.endsWith('2') && 'two'",
                WITHIN
            )
            .await
            .unwrap(),
        json!("two")
    );
    browser.quit().await.unwrap();
}

#[tokio::test]
async fn errors_of_the_page_are_reported_once() {
    let browser = Browser::start().await.unwrap();
    let _page = open_page(&browser, PAGE).await;
    let errors = browser.console_errors().await.unwrap();
    let has = |prefix: &str, text: &str| {
        errors
            .iter()
            .any(|error| error.starts_with(prefix) && error.contains(text))
    };
    assert!(has("log: ", "boom"), "{errors:#?}");
    assert!(has("page: console.error: ", "boom"), "{errors:#?}");
    // The hook ran before the page's first script.
    assert!(has("page: error: ", "Error: early"), "{errors:#?}");
    assert!(browser.console_errors().await.unwrap().is_empty());

    browser.click("#fail").await.unwrap();
    browser
        .wait_for("window.__mcpErrors.length >= 3", WITHIN)
        .await
        .unwrap();
    let errors = browser.console_errors().await.unwrap();
    assert!(
        errors
            .iter()
            .any(|e| e == "page: unhandledrejection: Error: nobody waits"),
        "{errors:#?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("page: securitypolicyviolation: img-src")
                && e.ends_with("/blocked.png")),
        "{errors:#?}"
    );
    browser.quit().await.unwrap();
}

#[tokio::test]
async fn looks_waits_and_failures_are_reported() {
    let browser = Browser::start().await.unwrap();
    let _page = open_page(&browser, PAGE).await;

    let dark = "matchMedia('(prefers-color-scheme: dark)').matches";
    let background = "getComputedStyle(document.body).backgroundColor";
    assert_eq!(
        browser
            .execute(&format!("return {dark};"), Vec::new())
            .await
            .unwrap(),
        json!(false)
    );
    browser.set_color_scheme(true).await.unwrap();
    assert_eq!(
        browser
            .execute(&format!("return {dark};"), Vec::new())
            .await
            .unwrap(),
        json!(true)
    );
    assert_eq!(
        browser
            .execute(&format!("return {background};"), Vec::new())
            .await
            .unwrap(),
        json!("rgb(0, 0, 0)")
    );
    browser.set_color_scheme(false).await.unwrap();
    assert_eq!(
        browser
            .execute(&format!("return {dark};"), Vec::new())
            .await
            .unwrap(),
        json!(false)
    );

    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser/harness.png");
    let _ = std::fs::remove_file(&shot);
    browser.screenshot(&shot).await.unwrap();
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    // The IHDR chunk: width and height of the 1280x900 window.
    assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 1280);

    let error = browser
        .wait_for("document.title === 'never'", Duration::from_millis(300))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("`document.title === 'never'`"), "{error}");
    assert!(error.contains("its last value: false"), "{error}");
    let error = browser
        .wait_for(
            "document.querySelector('#none').id",
            Duration::from_millis(200),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("threw TypeError"), "{error}");

    let error = browser.find("#none").await.unwrap_err();
    let webdriver = error.downcast_ref::<WebDriverError>().unwrap();
    assert_eq!(webdriver.error, "no such element");
    assert_eq!(webdriver.command, "POST /element");
    browser.quit().await.unwrap();
}

/// A page on `localhost` is another site than one on `127.0.0.1`; both
/// reach a server bound to 127.0.0.1.
#[tokio::test]
async fn a_page_is_served_under_either_host() {
    let browser = Browser::start().await.unwrap();
    let page = serve_page("<title>other</title>".to_owned()).await.unwrap();
    browser.goto(&page.url_on("localhost")).await.unwrap();
    assert_eq!(browser.title().await.unwrap(), "other");
    let origin = browser
        .execute("return location.origin;", Vec::new())
        .await
        .unwrap();
    assert_eq!(
        origin,
        json!(format!("http://localhost:{}", page.addr().port()))
    );
    assert!(browser.console_errors().await.unwrap().is_empty());
    drop(page);
    browser.quit().await.unwrap();
}

/// Neither quitting nor dropping (a test that panics) leaves a process of
/// the browser behind.
#[tokio::test]
async fn no_browser_process_outlives_the_harness() {
    for quit in [true, false] {
        let browser = Browser::start().await.unwrap();
        let _page = open_page(&browser, "<title>x</title>").await;
        let profile = browser.profile_dir().to_owned();
        let running = processes_of(&profile);
        assert!(running.len() > 1, "the browser's processes: {running:?}");
        if quit {
            browser.quit().await.unwrap();
        } else {
            drop(browser);
        }
        assert_eq!(processes_of(&profile), Vec::<String>::new(), "quit: {quit}");
        assert!(!profile.exists(), "the profile is removed; quit: {quit}");
    }
}
