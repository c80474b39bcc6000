//! ReferenceGrant (Gateway API): a reference from an object in one namespace to an object in another
//! counts only when a ReferenceGrant in the referent's namespace lets the referring kind of the
//! referring namespace point at it (`from` group, kind and namespace; `to` group, kind and, when the
//! grant names one, name). References within a namespace need no grant. Used for HTTPRoute
//! backendRefs (Services and XBackends) and ExternalAuth backendRefs (Services) alike.

use crate::model::Inventory;

/// A kind of object, as a grant names it (`group` is empty for the core API group).
#[derive(Clone, Copy, Debug)]
pub struct Kind<'a> {
    pub group: &'a str,
    pub kind: &'a str,
}

pub const HTTP_ROUTE: Kind<'static> = Kind {
    group: toolgate_policy::api::GATEWAY_GROUP,
    kind: "HTTPRoute",
};
pub const ACCESS_POLICY: Kind<'static> = Kind {
    group: toolgate_policy::api::GROUP,
    kind: "XAccessPolicy",
};
pub const SERVICE: Kind<'static> = Kind {
    group: "",
    kind: "Service",
};
pub const XBACKEND: Kind<'static> = Kind {
    group: toolgate_policy::api::GROUP,
    kind: "XBackend",
};

/// Whether an object of kind `from` in namespace `from_ns` may refer to `to_ns/to_name` of kind `to`.
pub fn permits(
    inv: &Inventory,
    from: Kind<'_>,
    from_ns: &str,
    to: Kind<'_>,
    to_ns: &str,
    to_name: &str,
) -> bool {
    from_ns == to_ns
        || inv.grants.iter().filter(|g| g.namespace == to_ns).any(|g| {
            g.spec
                .from
                .iter()
                .any(|f| f.group == from.group && f.kind == from.kind && f.namespace == from_ns)
                && g.spec.to.iter().any(|t| {
                    t.group == to.group
                        && t.kind == to.kind
                        && t.name
                            .as_deref()
                            .is_none_or(|n| n.is_empty() || n == to_name)
                })
        })
}

/// Why a reference does not count (Gateway API's reason `RefNotPermitted`).
pub fn not_permitted(
    from: Kind<'_>,
    from_ns: &str,
    to: Kind<'_>,
    to_ns: &str,
    to_name: &str,
) -> String {
    format!(
        "reference to {} {to_ns}/{to_name} is not permitted (RefNotPermitted): no ReferenceGrant in namespace {to_ns} \
         allows {} from namespace {from_ns} to refer to it",
        to.kind, from.kind
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inventory(yaml: &str) -> Inventory {
        Inventory::from_yaml(yaml)
    }

    #[test]
    fn a_grant_lets_only_the_kinds_namespaces_and_names_it_gives() {
        let inv = inventory(
            "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {name: g, namespace: tools}\n\
             spec:\n  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: apps}]\n  to: [{group: '', kind: Service, name: mcp}]\n",
        );
        assert_eq!(inv.grants.len(), 1);
        assert!(permits(&inv, HTTP_ROUTE, "apps", SERVICE, "tools", "mcp"));
        assert!(
            permits(&inv, HTTP_ROUTE, "tools", SERVICE, "tools", "other"),
            "same namespace: no grant needed"
        );
        assert!(
            !permits(&inv, HTTP_ROUTE, "apps", SERVICE, "tools", "other"),
            "another name"
        );
        assert!(
            !permits(&inv, HTTP_ROUTE, "other-apps", SERVICE, "tools", "mcp"),
            "another namespace"
        );
        assert!(
            !permits(&inv, ACCESS_POLICY, "apps", SERVICE, "tools", "mcp"),
            "another kind refers"
        );
        assert!(
            !permits(&inv, HTTP_ROUTE, "apps", XBACKEND, "tools", "mcp"),
            "another kind referred to"
        );
        assert!(
            !permits(&inv, HTTP_ROUTE, "apps", SERVICE, "elsewhere", "mcp"),
            "a grant speaks for its own namespace only"
        );
        let message = not_permitted(HTTP_ROUTE, "apps", SERVICE, "tools", "other");
        assert!(
            message.contains("Service tools/other") && message.contains("RefNotPermitted"),
            "{message}"
        );
    }

    #[test]
    fn a_grant_without_a_name_covers_every_object_of_the_kind() {
        let inv = inventory(
            "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {name: g, namespace: tools}\n\
             spec:\n  from: [{group: agentic.networking.x-k8s.io, kind: XAccessPolicy, namespace: apps}]\n  to: [{group: '', kind: Service}]\n",
        );
        assert!(permits(
            &inv,
            ACCESS_POLICY,
            "apps",
            SERVICE,
            "tools",
            "authz"
        ));
        assert!(permits(
            &inv,
            ACCESS_POLICY,
            "apps",
            SERVICE,
            "tools",
            "anything"
        ));
        assert!(!permits(
            &inv, HTTP_ROUTE, "apps", SERVICE, "tools", "authz"
        ));
    }
}
