"""URL routes: the admin now; the dashboard pages join as they are built."""

from django.contrib import admin
from django.urls import path

from karpui import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("admin/", admin.site.urls),
]
