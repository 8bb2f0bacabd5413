//! The harness's OCI registry: anonymous and authenticated registries answer `/v2/` as the
//! distribution API says, a stopped one is unreachable, and a restarted one answers again on
//! the same port.

use anyhow::Result;
use kubewasm_tests::http_get_with;
use kubewasm_tests::registry::{self, Registry, basic_authorization};

async fn v2(address: &str, authorization: Option<&str>) -> Result<u16> {
    let headers: Vec<_> = authorization
        .map(|a| ("Authorization", a))
        .into_iter()
        .collect();
    Ok(http_get_with(address, "/v2/", &headers).await?.0)
}

#[tokio::test]
async fn registries_answer_v2_and_survive_a_restart() -> Result<()> {
    // Started from a thread that ends at once: the parent-death signal must not stop it.
    std::thread::spawn(registry::shared)
        .join()
        .expect("starting the shared registry");
    let anonymous = registry::shared();
    assert_eq!(v2(&anonymous.address(), None).await?, 200);
    assert_eq!(
        anonymous.reference("guests/mirror:1"),
        format!("{}/guests/mirror:1", anonymous.address())
    );

    let mut authenticated = Registry::start_with_auth("tester", "s3cret");
    let address = authenticated.address();
    let good = basic_authorization("tester", "s3cret");
    let bad = basic_authorization("tester", "wrong");
    assert_eq!(v2(&address, None).await?, 401);
    assert_eq!(v2(&address, Some(&bad)).await?, 401);
    assert_eq!(v2(&address, Some(&good)).await?, 200);

    authenticated.stop();
    assert!(
        v2(&address, Some(&good)).await.is_err(),
        "a stopped registry is unreachable"
    );
    authenticated.restart();
    assert_eq!(authenticated.address(), address);
    assert_eq!(v2(&address, Some(&good)).await?, 200);
    assert_eq!(v2(&address, None).await?, 401);
    Ok(())
}
