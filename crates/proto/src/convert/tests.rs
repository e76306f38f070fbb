use super::*;

#[test]
fn demo_tools_round_trip_through_protobuf() {
    let state = tp_registry::demo::DemoWorld::load().state().unwrap();
    for tool in state.tools.values() {
        let spec: pb::ToolSpec = (&tool.def).into();
        let back = try_tool_def(Some(spec)).unwrap();
        assert_eq!(back, tool.def, "{}", tool.def.name);
    }
    for tenant in state.tenants.values() {
        let mut back = try_tenant(Some(tenant.into())).unwrap();
        // The incarnation is the control plane's to choose: never taken from a request.
        assert_eq!(back.uid, "");
        back.revision = tenant.revision;
        back.uid = tenant.uid.clone();
        assert_eq!(&back, tenant);
    }
    for adr in state.adrs.values() {
        assert_eq!(&try_adr(Some(adr.into())).unwrap(), adr);
    }
}

#[test]
fn connected_apis_must_be_chosen_and_every_tool_is_explicit() {
    let absent = pb::Tenant {
        id: "a".into(),
        ..Default::default()
    };
    let refused = try_tenant(Some(absent)).unwrap_err();
    assert_eq!(refused.violations[0].field, "tenant.connected_apis");
    let with = |apis: pb::ConnectedApis| pb::Tenant {
        id: "a".into(),
        connected_apis: Some(apis),
        ..Default::default()
    };
    let empty = with(pb::ConnectedApis::default());
    assert_eq!(
        try_tenant(Some(empty)).unwrap().connected_apis,
        Some(vec![])
    );
    let all = with(pb::ConnectedApis {
        providers: vec![],
        all: true,
    });
    assert_eq!(try_tenant(Some(all)).unwrap().connected_apis, None);
    let both = with(pb::ConnectedApis {
        providers: vec!["google".into()],
        all: true,
    });
    assert!(try_tenant(Some(both)).is_err());
    // A tenant stored without the field (it predates it) reads as `all`.
    let old = tp_registry::Tenant::new("old");
    assert_eq!(
        pb::Tenant::from(&old).connected_apis,
        Some(pb::ConnectedApis {
            providers: vec![],
            all: true
        })
    );
}

#[test]
fn an_update_changes_only_what_it_names() {
    let mut acme = tp_registry::Tenant::new("acme");
    acme.display_name = "Acme Corp".into();
    acme.connected_apis = Some(vec!["google".into(), "hubspot".into()]);
    acme.rate_limit_per_minute = 30;
    // Without a mask: only the fields set to something other than their default.
    let partial = pb::Tenant {
        id: "acme".into(),
        rate_limit_per_minute: 60,
        ..Default::default()
    };
    let patched = patch_tenant(&acme, partial.clone(), None).unwrap();
    assert_eq!(patched.rate_limit_per_minute, 60);
    assert_eq!(patched.display_name, "Acme Corp");
    assert_eq!(patched.connected_apis, acme.connected_apis);
    assert_eq!(
        operator_fields_changed(&acme, &patched),
        vec!["rate_limit_per_minute"]
    );
    // With a mask: what it names, even back to the default; connected_apis never by omission.
    let mask = |paths: &[&str]| prost_types::FieldMask {
        paths: paths.iter().map(|p| (*p).to_owned()).collect(),
    };
    let cleared = patch_tenant(&acme, partial.clone(), Some(&mask(&["display_name"]))).unwrap();
    assert_eq!(cleared.display_name, "");
    assert_eq!(cleared.rate_limit_per_minute, 30);
    let omitted = patch_tenant(&acme, partial.clone(), Some(&mask(&["connected_apis"])));
    assert_eq!(
        omitted.unwrap_err().violations[0].field,
        "tenant.connected_apis"
    );
    let unknown = patch_tenant(&acme, partial.clone(), Some(&mask(&["conected_apis"])));
    assert!(
        unknown.unwrap_err().to_string().contains("conected_apis"),
        "the misspelt path is named"
    );
    // One disclosure field leaves the others alone.
    acme.disclosure.threshold = 12;
    let progressive = pb::Tenant {
        id: "acme".into(),
        disclosure: Some(pb::Disclosure {
            mode: pb::DisclosureMode::Progressive as i32,
            ..Default::default()
        }),
        ..Default::default()
    };
    let patched = patch_tenant(&acme, progressive, None).unwrap();
    assert_eq!(patched.disclosure.mode, domain::DisclosureMode::Progressive);
    assert_eq!(patched.disclosure.threshold, 12);
}

#[test]
fn unknown_enum_values_are_invalid_arguments() {
    let spec = pb::ToolSpec {
        bucket: 99,
        ..Default::default()
    };
    assert_eq!(
        try_tool_def(Some(spec)).unwrap_err().violations[0].field,
        "tool.bucket"
    );
    assert!(try_adr_status(42, None).is_err());
    assert!(try_adr_status(0, None).is_err());
    assert_eq!(
        try_adr_status(0, Some(domain::AdrStatus::Proposed)).unwrap(),
        domain::AdrStatus::Proposed
    );
}

#[test]
fn an_executor_update_keeps_what_it_does_not_name() {
    let existing = try_executor(Some(pb::ExecutorInfo {
        name: "demo".into(),
        endpoint: "http://127.0.0.1:50053".into(),
        timeout_ms: 10_000,
        max_concurrency: 16,
        description: "the demo".into(),
        ..Default::default()
    }))
    .unwrap();
    let moved = pb::ExecutorInfo {
        name: "demo".into(),
        endpoint: "http://127.0.0.1:50099".into(),
        ..Default::default()
    };
    let patched = patch_executor(Some(&existing), moved.clone(), None).unwrap();
    assert_eq!(patched.endpoint, "http://127.0.0.1:50099");
    assert_eq!((patched.timeout_ms, patched.max_concurrency), (10_000, 16));
    assert_eq!(patched.description, "the demo");
    // Named in a mask, a field goes back to its default.
    let mask = prost_types::FieldMask {
        paths: vec!["timeout_ms".into()],
    };
    let reset = patch_executor(Some(&existing), moved.clone(), Some(&mask)).unwrap();
    assert_eq!(reset.timeout_ms, 30_000);
    assert_eq!(reset.endpoint, existing.endpoint, "not named: kept");
    let typo = prost_types::FieldMask {
        paths: vec!["timeout".into()],
    };
    assert!(patch_executor(Some(&existing), moved.clone(), Some(&typo)).is_err());
    // A new executor takes the defaults.
    let new = patch_executor(None, moved, None).unwrap();
    assert_eq!((new.timeout_ms, new.max_concurrency), (30_000, 64));
}
