"""Routes of one cluster's Kubernetes API, included under /k8s/clusters/<cluster>/."""

from django.urls import path, re_path

from karpui.kubeapi import views

urlpatterns = [
    re_path(r"^$", views.paths, name="kubeapi-paths"),
    re_path(r"^version/?$", views.version, name="kubeapi-version"),
    re_path(r"^(?P<endpoint>livez|readyz|healthz)(?:/(?P<check>.+))?$", views.health_check, name="kubeapi-health"),
    re_path(r"^api/?$", views.core_root, name="kubeapi-core"),
    re_path(r"^apis/?$", views.groups_root, name="kubeapi-groups"),
    re_path(r"^api/(?P<version>v1)/?$", views.group_version, name="kubeapi-core-v1"),
    re_path(r"^api/(?P<version>v1)/(?P<rest>.+)$", views.resource, name="kubeapi-core-resource"),
    re_path(r"^apis/(?P<group>[^/]+)/?$", views.group, name="kubeapi-group"),
    re_path(r"^apis/(?P<group>[^/]+)/(?P<version>[^/]+)/?$", views.group_version, name="kubeapi-group-version"),
    re_path(r"^apis/(?P<group>[^/]+)/(?P<version>[^/]+)/(?P<rest>.+)$", views.resource, name="kubeapi-resource"),
    path("openapi/v2", views.openapi_v2, name="kubeapi-openapi-v2"),
    re_path(r"^openapi/v3/?$", views.openapi_v3_index, name="kubeapi-openapi-v3"),
    re_path(r"^openapi/v3/(?P<path>.+)$", views.openapi_v3, name="kubeapi-openapi-v3-path"),
]
