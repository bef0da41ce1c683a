from django.urls import path

from webapp.alerts import views

app_name = "alerts"

urlpatterns = [
    path("", views.channel_list, name="list"),
    path("new", views.create, name="create"),
    path("<int:channel_id>/", views.channel_detail, name="channel"),
    path("<int:channel_id>/delete", views.delete, name="delete"),
    path("<int:channel_id>/test", views.send_test, name="test"),
]
