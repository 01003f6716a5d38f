//! The capped sessions: quotas, evictions, refusals and rests, with no HTTP.

use super::*;

const A: Option<Holder> = Some(Holder::Address(IpAddr::V4(std::net::Ipv4Addr::new(
    10, 0, 0, 1,
))));
const B: Option<Holder> = Some(Holder::Address(IpAddr::V4(std::net::Ipv4Addr::new(
    10, 0, 0, 2,
))));

fn sessions(max: usize, per_client: usize) -> CappedSessions {
    CappedSessions::new(
        max,
        per_client,
        (Duration::from_secs(60), Duration::from_secs(30)),
        Arc::default(),
        None,
    )
}

/// A session opened by `client`, as rmcp opens one for `initialize`.
async fn open(sessions: &CappedSessions, client: Option<Holder>) -> Result<SessionId, Protection> {
    let opening = Opening {
        client,
        caller: None,
        refused: Default::default(),
    };
    OPENING
        .scope(opening, async {
            match sessions.create_session().await {
                Ok((id, _transport)) => Ok(id),
                Err(_) => Err(OPENING.with(|opening| opening.refused.get()).unwrap()),
            }
        })
        .await
}

/// Sessions `ids`, initialized, left quiet past `session_rest_after` and
/// rested (every one may).
async fn rest(sessions: &CappedSessions, ids: &[&SessionId]) {
    let initialize: InitializeRequestParams = serde_json::from_value(serde_json::json!({
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    }))
    .unwrap();
    for id in ids {
        let state = SessionState::new(initialize.clone());
        SessionStore::store(sessions, id, &state).await.unwrap();
    }
    tokio::time::advance(Duration::from_secs(31)).await;
    sessions.rest_quiet(&|_: &str| true).await;
}

/// Two callers behind one address (a NAT, a proxy) each have their
/// own quota; the shared bearer's holders share the address's.
#[tokio::test(start_paused = true)]
async fn a_named_caller_has_its_own_quota_whatever_its_address() {
    use crate::access::Via;
    let address = Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 9)));
    let named = |client: &str| Caller {
        client: Some(client.to_owned()),
        ..Caller::anonymous(Via::Key)
    };
    let (alice, bob) = (named("alice"), named("bob"));
    assert_eq!(
        Holder::of(&alice, address),
        Some(Holder::Caller("client:alice".into()))
    );
    assert_eq!(
        Holder::of(&Caller::anonymous(Via::Bearer), address),
        address.map(Holder::Address)
    );
    let sessions = sessions(10, 1);
    let first = open(&sessions, Holder::of(&alice, address)).await.unwrap();
    let _busy = sessions.begin(&first).unwrap();
    assert!(open(&sessions, Holder::of(&bob, address)).await.is_ok());
    assert_eq!(
        open(&sessions, Holder::of(&alice, address)).await,
        Err(Protection::SessionRefusedAtClientQuota)
    );
}

#[tokio::test(start_paused = true)]
async fn at_the_cap_the_least_recently_used_idle_session_makes_room() {
    let sessions = sessions(2, 2);
    let first = open(&sessions, A).await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    let second = open(&sessions, B).await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    // The first is used again: now the second is the least recent.
    drop(sessions.begin(&first).unwrap());
    let third = open(&sessions, B).await.unwrap();
    assert!(sessions.has(&first).await && sessions.has(&third).await);
    assert!(!sessions.has(&second).await, "the least recently used went");
    assert_eq!(sessions.tallies.get(Protection::SessionEvictedAtCap), 1);
}

/// Resting sessions keep their place: at the cap, a new session ends
/// the least recently used of them, as it would an idle awake one.
#[tokio::test(start_paused = true)]
async fn resting_sessions_count_at_the_cap() {
    let sessions = sessions(2, 2);
    let first = open(&sessions, A).await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    let second = open(&sessions, B).await.unwrap();
    rest(&sessions, &[&first, &second]).await;
    assert_eq!(sessions.tallies.get(Protection::SessionRested), 2);
    assert!(
        sessions.local.sessions.read().await.is_empty(),
        "rmcp's are gone"
    );
    assert!(sessions.has(&first).await && sessions.has(&second).await);
    assert!(
        SessionStore::load(&sessions, &second)
            .await
            .unwrap()
            .is_none(),
        "given only to the request that claims it"
    );

    let third = open(&sessions, A).await.unwrap();
    assert_eq!(sessions.tallies.get(Protection::SessionEvictedAtCap), 1);
    assert!(!sessions.has(&first).await, "the least recently used went");
    assert!(sessions.has(&second).await && sessions.has(&third).await);
    assert!(
        SessionStore::load(&sessions, &first)
            .await
            .unwrap()
            .is_none()
    );
}

/// The end of a rested rmcp session, heard only after the session was
/// restored (its worker slow to say so), ends nothing: the restored
/// session goes on.
#[tokio::test(start_paused = true)]
async fn a_rested_sessions_late_end_does_not_end_its_restored_one() {
    let sessions = sessions(4, 4);
    let id = open(&sessions, A).await.unwrap();
    rest(&sessions, &[&id]).await;
    // A request: rmcp finds no session (after waiting out the fall), loads
    // it and restores it.
    assert!(!sessions.has_session(&id).await.unwrap());
    assert!(SessionStore::load(&sessions, &id).await.unwrap().is_some());
    let restored = sessions.restore_session(id.clone()).await.unwrap();
    assert!(matches!(restored, RestoreOutcome::Restored(_)));
    assert_eq!(sessions.tallies.get(Protection::SessionRestored), 1);

    // The old worker's last word comes now.
    sessions.close_session(&id).await.unwrap();
    assert!(
        sessions.local.has_session(&id).await.unwrap(),
        "the restored one goes on"
    );
    assert!(sessions.has(&id).await);
    // Its own end, later, ends it.
    sessions.close_session(&id).await.unwrap();
    assert!(!sessions.has(&id).await);
}

/// A session its client ended (`DELETE`) while a request of its was
/// restoring it stays ended: the restore is refused, no rmcp session is
/// left behind without an owner.
#[tokio::test(start_paused = true)]
async fn a_session_deleted_while_it_wakes_stays_ended() {
    let sessions = sessions(1, 1);
    let id = open(&sessions, A).await.unwrap();
    rest(&sessions, &[&id]).await;
    assert!(!sessions.has_session(&id).await.unwrap(), "claimed");
    assert!(SessionStore::load(&sessions, &id).await.unwrap().is_some());
    // The client's DELETE, as rmcp sends it on.
    sessions.close_session(&id).await.unwrap();
    SessionStore::delete(&sessions, &id).await.unwrap();
    let restored = sessions.restore_session(id.clone()).await.unwrap();
    assert!(matches!(restored, RestoreOutcome::NotSupported));
    assert!(!sessions.has(&id).await);
    assert!(!sessions.local.has_session(&id).await.unwrap());
    assert!(open(&sessions, B).await.is_ok(), "its place is free");
}

/// While one request restores a resting session, another waits for it
/// (rmcp's new session must get its `initialize` first); a restore that
/// never ends (its request went away) is undone, and the waiting request
/// restores the session itself.
#[tokio::test(start_paused = true)]
async fn a_request_waits_for_another_to_restore_and_undoes_one_left_midway() {
    let sessions = Arc::new(sessions(4, 4));
    let id = open(&sessions, A).await.unwrap();
    rest(&sessions, &[&id]).await;
    // The first request claims it and gets rmcp's session back, then goes
    // away before `initialize` is replayed.
    assert!(!sessions.has_session(&id).await.unwrap());
    let restored = sessions.restore_session(id.clone()).await.unwrap();
    assert!(matches!(restored, RestoreOutcome::Restored(_)));

    let second = tokio::spawn({
        let (sessions, id) = (sessions.clone(), id.clone());
        async move { sessions.has_session(&id).await.unwrap() }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!second.is_finished(), "it waits for the restore");
    // Undone after WAKING_AT_MOST: the second claims it, to restore.
    assert!(!second.await.unwrap());
    assert!(
        !sessions.local.has_session(&id).await.unwrap(),
        "the half one closed"
    );
    assert!(SessionStore::load(&*sessions, &id).await.unwrap().is_some());
}

#[tokio::test(start_paused = true)]
async fn busy_sessions_are_never_ended_and_a_full_busy_gateway_refuses() {
    let sessions = sessions(2, 2);
    let first = open(&sessions, A).await.unwrap();
    let second = open(&sessions, B).await.unwrap();
    let _first_busy = sessions.begin(&first).unwrap();
    let second_busy = sessions.begin(&second).unwrap();
    assert_eq!(
        sessions.refusal(A).await,
        Some(Protection::SessionRefusedAtCap)
    );
    assert_eq!(
        open(&sessions, A).await,
        Err(Protection::SessionRefusedAtCap)
    );
    assert!(sessions.has(&first).await && sessions.has(&second).await);
    // Once the second's request ends, it is the one that makes room.
    drop(second_busy);
    let third = open(&sessions, A).await.unwrap();
    assert!(sessions.has(&first).await && sessions.has(&third).await);
    assert!(!sessions.has(&second).await);
    assert_eq!(sessions.tallies.get(Protection::SessionRefusedAtCap), 1);
}

#[tokio::test(start_paused = true)]
async fn a_client_at_its_quota_replaces_its_own_idle_sessions_only() {
    let sessions = sessions(10, 2);
    let other = open(&sessions, B).await.unwrap();
    let oldest = open(&sessions, A).await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    let mine = [oldest, open(&sessions, A).await.unwrap()];
    tokio::time::advance(Duration::from_secs(1)).await;
    let third = open(&sessions, A).await.unwrap();
    assert!(!sessions.has(&mine[0]).await, "its oldest went");
    assert!(sessions.has(&mine[1]).await && sessions.has(&third).await);
    assert!(
        sessions.has(&other).await,
        "another client's session is not touched"
    );
    assert_eq!(
        sessions
            .tallies
            .get(Protection::SessionEvictedAtClientQuota),
        1
    );
    // All of its sessions busy: refused, though the gateway has room.
    let _busy = [
        sessions.begin(&mine[1]).unwrap(),
        sessions.begin(&third).unwrap(),
    ];
    assert_eq!(
        open(&sessions, A).await,
        Err(Protection::SessionRefusedAtClientQuota)
    );
    assert!(
        open(&sessions, B).await.is_ok(),
        "another client still gets in"
    );
}

#[tokio::test(start_paused = true)]
async fn sessions_rmcp_ended_by_itself_are_forgotten() {
    let sessions = sessions(1, 1);
    let first = open(&sessions, A).await.unwrap();
    let _busy = sessions.begin(&first).unwrap();
    // As when it idles out: rmcp drops it without asking us.
    sessions.local.close_session(&first).await.unwrap();
    assert!(open(&sessions, A).await.is_ok());
    assert_eq!(sessions.tallies.get(Protection::SessionEvictedAtCap), 0);
}

#[tokio::test(start_paused = true)]
async fn in_a_fleet_the_ids_name_this_node_and_are_sessions_like_any_other() {
    let key = crate::config::FleetKey::new([9; 32]);
    let ids = Arc::new(SessionIds::new("node-a", &key));
    let sessions = CappedSessions::new(
        1,
        1,
        (Duration::from_secs(60), Duration::from_secs(30)),
        Arc::default(),
        Some(ids.clone()),
    );
    let first = open(&sessions, A).await.unwrap();
    assert!(first.starts_with("node-a."), "{first}");
    assert_eq!(ids.holder(&first), super::super::session_ids::Holder::Here);
    let other = SessionIds::new("node-b", &key);
    assert_eq!(
        other.holder(&first),
        super::super::session_ids::Holder::Node("node-a")
    );
    assert!(sessions.has(&first).await);
    // The cap holds as before: the idle first session makes room.
    let second = open(&sessions, A).await.unwrap();
    assert!(!sessions.has(&first).await && sessions.has(&second).await);
    sessions.close_session(&second).await.unwrap();
    assert!(!sessions.has(&second).await);
}
