ADMINS_GROUP = "admins"
