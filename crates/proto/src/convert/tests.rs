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
fn connected_apis_presence_is_kept() {
    let absent = pb::Tenant {
        id: "a".into(),
        ..Default::default()
    };
    assert_eq!(try_tenant(Some(absent)).unwrap().connected_apis, None);
    let empty = pb::Tenant {
        id: "a".into(),
        connected_apis: Some(pb::ConnectedApis::default()),
        ..Default::default()
    };
    assert_eq!(
        try_tenant(Some(empty)).unwrap().connected_apis,
        Some(vec![])
    );
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
