"""URL routes: the dashboard pages, their actions, and the admin."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from karpui import catalog_views, login, metrics, node_actions, node_views, nodepool_views, object_views, views

urlpatterns = [
    path("", views.home, name="home"),
    path("banners/", views.banners, name="banners"),
    path("pods/pending/", views.pending, name="pending"),
    path("nodes/", views.nodes, name="nodes"),
    path("nodes/<str:name>/", node_views.node_detail, name="node-detail"),
    path("nodes/<str:name>/cordon", node_actions.node_cordon, name="node-cordon"),
    path("nodes/<str:name>/uncordon", node_actions.node_uncordon, name="node-uncordon"),
    path("nodes/<str:name>/disrupt", node_actions.node_disrupt, name="node-disrupt"),
    path("objects/<str:kind>/<str:name>/", object_views.object_detail, name="object-detail"),
    path("objects/<str:kind>/<str:namespace>/<str:name>/", object_views.object_detail, name="object-detail-namespaced"),
    path("disruption/", views.disruption_queue, name="disruption"),
    path("disruption/pause", views.pause, name="disruption-pause"),
    path("disruption/resume", views.resume, name="disruption-resume"),
    path("disruption/approve", views.commands_approve, name="commands-approve"),
    path("disruption/<str:name>/approve", views.command_approve, name="command-approve"),
    path("disruption/<str:name>/deny", views.command_deny, name="command-deny"),
    path("savings/", views.savings, name="savings"),
    path("trends/", views.trends, name="trends"),
    path("events/", views.events, name="events"),
    path("catalog/", views.catalog, name="catalog"),
    path("catalog/import", catalog_views.catalog_import, name="catalog-import"),
    path("catalog/<slug:name>/export", catalog_views.catalog_export, name="catalog-export"),
    path("catalog/<slug:name>/delete", catalog_views.catalog_delete, name="catalog-delete"),
    path("devices/", views.devices, name="devices"),
    path("nodepools/", nodepool_views.nodepool_list, name="nodepools"),
    path("nodepools/new/", nodepool_views.nodepool_new, name="nodepool-new"),
    path("nodepools/<str:name>/", nodepool_views.nodepool_edit, name="nodepool-edit"),
    path("nodepools/<str:name>/delete", nodepool_views.nodepool_delete, name="nodepool-delete"),
    path("nodepools/<str:name>/approval-mode", views.nodepool_approval_mode, name="nodepool-approval-mode"),
    path("accounts/login/", login.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", metrics.metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path("k8s/clusters/<slug:cluster>/", include("karpui.kubeapi.urls")),
]
