CLAIMS = {}
